//! `renew_many` where the database answers a renewal of many leases with a count alone
//! (MariaDB): a batch whose count falls short finds its lost leases in a few statements, by
//! halves, rather than one statement per lease, and answers exactly the leases still held. On
//! an executor that models the lease table: a renewal matches every pair whose lease is not
//! lost, and answers how many.

use std::collections::HashSet;
use std::future::Future;
use std::pin::pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use async_trait::async_trait;
use lease_core::{BoxError, HolderId, LeaseName, LeaseStore, StoreErrorKind, Ttl};
use lease_sql::{Dialect, Execute, LeaseRow, Param, PoolState, Query, RenewManyResult, SqlStore};

/// An executor whose renewals match every pair but those of the `lost` names, counting the
/// statements it was sent.
#[derive(Debug, Default)]
struct Modelled {
    lost: HashSet<String>,
    sent: Mutex<usize>,
}

#[async_trait]
impl Execute for Modelled {
    type Pool = ();

    fn dialect(&self) -> Dialect {
        Dialect::MySql
    }

    fn pool(&self) -> &() {
        &()
    }

    fn pool_state(&self) -> PoolState {
        PoolState { size: 0, idle: 0 }
    }

    fn classify(&self, _: &(dyn std::error::Error + Send + Sync + 'static)) -> StoreErrorKind {
        StoreErrorKind::Permanent
    }

    async fn int_pairs(&self, _: Query<'_>) -> Result<Vec<(i64, i64)>, BoxError> {
        Err("not modelled".into())
    }

    async fn ints(&self, _: Query<'_>) -> Result<Vec<i64>, BoxError> {
        Err("not modelled".into())
    }

    async fn text_pairs(&self, _: Query<'_>) -> Result<Vec<(String, String)>, BoxError> {
        Err("not modelled".into())
    }

    async fn lease_rows(&self, _: Query<'_>) -> Result<Vec<LeaseRow>, BoxError> {
        Err("not modelled".into())
    }

    /// A renew-many's parameters are each name and holder in turn, then the TTL; a single
    /// renewal's, the name, the holder and the TTL: either way the names are every other text
    /// from the first.
    async fn affected(&self, query: Query<'_>) -> Result<u64, BoxError> {
        *self.sent.lock().unwrap() += 1;
        let texts: Vec<&str> = query
            .params()
            .iter()
            .filter_map(|param| match param {
                Param::Text(text) => Some(&**text),
                Param::Int(_) => None,
            })
            .collect();
        let held = texts
            .chunks(2)
            .filter(|pair| !self.lost.contains(pair[0]))
            .count();
        Ok(held as u64)
    }

    async fn batch(&self, _: &str) -> Result<(), BoxError> {
        Err("not modelled".into())
    }
}

/// The answer of `future`, which the modelled executor lets finish at its first poll.
fn at_once<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("the modelled executor never waits"),
    }
}

/// Renews `leases` leases named `job-0`, `job-1`, ... of which those at `lost` positions are
/// lost: the answer, and how many statements were sent.
fn renew(leases: usize, lost: &[usize]) -> (Vec<bool>, usize) {
    let store = SqlStore::<Modelled>::new(Modelled {
        lost: lost.iter().map(|i| format!("job-{i}")).collect(),
        sent: Mutex::new(0),
    });
    assert_eq!(
        store.statements().renew_many_result(),
        RenewManyResult::Count
    );
    let pairs: Vec<(LeaseName, HolderId)> = (0..leases)
        .map(|i| {
            (
                LeaseName::new(format!("job-{i}")).unwrap(),
                HolderId::generate(),
            )
        })
        .collect();
    let answer = at_once(store.renew_many(&pairs, Ttl::from_secs(30).unwrap())).unwrap();
    let sent = *store.executor().sent.lock().unwrap();
    (answer, sent)
}

fn expected(leases: usize, lost: &[usize]) -> Vec<bool> {
    (0..leases).map(|i| !lost.contains(&i)).collect()
}

#[test]
fn a_whole_batch_renewed_is_one_statement() {
    let (answer, sent) = renew(1_000, &[]);
    assert_eq!(answer, expected(1_000, &[]));
    assert_eq!(sent, 1);
}

#[test]
fn one_lost_lease_in_a_full_batch_is_found_in_a_few_statements() {
    let (answer, sent) = renew(1_000, &[617]);
    assert_eq!(answer, expected(1_000, &[617]));
    // The batch, then two halves for each of the ten halvings down to one lease.
    assert!(
        sent <= 1 + 2 * 10,
        "{sent} statements to find one lost lease of 1,000"
    );
}

#[test]
fn many_lost_leases_cost_about_one_statement_each() {
    let lost: Vec<usize> = (0..1_000).step_by(2).collect();
    let (answer, sent) = renew(1_000, &lost);
    assert_eq!(answer, expected(1_000, &lost));
    assert!(
        sent <= 1 + 1_000,
        "{sent} statements for 500 lost leases of 1,000"
    );
}

#[test]
fn a_tenth_lost_costs_fewer_statements_than_one_by_one() {
    let lost: Vec<usize> = (0..1_000).step_by(10).collect();
    let (answer, sent) = renew(1_000, &lost);
    assert_eq!(answer, expected(1_000, &lost));
    assert!(
        sent < 1_000,
        "{sent} statements for 100 lost leases of 1,000"
    );
}

#[test]
fn every_pattern_of_lost_leases_is_answered_exactly() {
    for (leases, lost) in [
        (1, vec![0]),
        (2, vec![1]),
        (7, vec![0, 6]),
        (64, (0..64).step_by(3).collect::<Vec<_>>()),
        (1_000, vec![0, 1, 2, 500, 998, 999]),
        (1_000, (0..1_000).collect()),
        (2_500, vec![1_000, 1_999, 2_000]),
    ] {
        let (answer, _) = renew(leases, &lost);
        assert_eq!(
            answer,
            expected(leases, &lost),
            "{leases} leases, lost {lost:?}"
        );
    }
}
