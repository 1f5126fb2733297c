//! The suite's fenced cases catch what they claim to: each broken check fails the case for its
//! rule, on every database. A check that locks nothing, a check in a separate statement (its
//! lock ends before the write), a check that ignores expiry, a check that matches a holder
//! cleared by a forced release; and, checked at the commit, a
//! commit before its check, a check that ignores expiry, and a row locked from the start.
#![cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]

mod common;

use common::Backend;
use common::fenced::{Check, Expect, expect};
use lease_sqlx::sqlx::{MySql, Postgres, Sqlite};
use lease_tests::cases;

/// One test per database for a broken `check` and the case that must catch it, with a failure
/// that says `rule`.
macro_rules! catches {
    ($test:ident, $check:ident, $case:ident, $rule:literal) => {
        mod $test {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let backend =
                    Backend::<Postgres>::plain().checking("postgres-broken", Check::$check);
                expect(backend, Expect::Catch($rule), |ctx| async move {
                    cases::$case(&*ctx).await
                })
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mariadb() {
                let backend = Backend::<MySql>::plain().checking("mariadb-broken", Check::$check);
                expect(backend, Expect::Catch($rule), |ctx| async move {
                    cases::$case(&*ctx).await
                })
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let backend = Backend::<Sqlite>::plain().checking("sqlite-broken", Check::$check);
                expect(backend, Expect::Catch($rule), |ctx| async move {
                    cases::$case(&*ctx).await
                })
                .await;
            }
        }
    };
}

catches!(
    unlocked_check_lets_a_takeover_in,
    Unlocked,
    takeover_waits_for_fenced_transaction,
    "the takeover succeeded while the holder's fenced transaction was open"
);
catches!(
    separate_check_lets_a_takeover_in,
    Separate,
    takeover_waits_for_fenced_transaction,
    "the takeover succeeded while the holder's fenced transaction was open"
);
catches!(
    check_ignoring_expiry_lets_an_expired_holder_write,
    IgnoresExpiry,
    expired_lease_fails_fenced_check,
    "a fenced write on an expired lease committed"
);
catches!(
    check_ignoring_a_cleared_holder_lets_a_freed_holder_write,
    IgnoresClearedHolder,
    freed_lease_fails_fenced_check,
    "a fenced write on a lease released by force committed"
);
catches!(
    commit_before_check_lets_a_stale_write_in,
    CommitBeforeChecking,
    stale_fenced_write_commits_nothing,
    "after the takeover the protected table holds"
);
catches!(
    commit_before_check_commits_during_a_takeover,
    CommitBeforeChecking,
    takeover_during_fenced_work_commits_nothing,
    "the stale holder's transaction committed"
);
catches!(
    commit_check_ignoring_expiry_lets_an_expired_holder_write,
    AtCommitIgnoresExpiry,
    expired_lease_fails_fenced_check,
    "a fenced write on an expired lease committed"
);
catches!(
    row_locked_from_the_start_holds_renewals_back,
    AtCommitLockedFromStart,
    renewal_goes_on_during_fenced_work,
    "the holder lost its lease while its fenced transaction was open"
);

/// On PostgreSQL connections that read from a snapshot (`SERIALIZABLE` by default), a check at
/// the commit without the store's guard fails every transaction a renewal fell into, with a
/// serialization failure (the renewal changed the row after the snapshot): a transaction of a
/// second, and one longer than the lease's TTL, whose holder must keep its lease. The cases
/// catch both.
mod unguarded_check_at_commit_under_a_snapshot {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fails_a_renewal_during_the_work() {
        let backend = Backend::<Postgres>::plain()
            .checking("postgres-broken", Check::AtCommitUnguarded)
            .serializable("postgres-serializable-broken");
        expect(
            backend,
            Expect::Catch("could not serialize access"),
            |ctx| async move { cases::fenced_work_spans_a_renewal(&*ctx).await },
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fails_a_transaction_longer_than_the_lease() {
        let backend = Backend::<Postgres>::plain()
            .checking("postgres-broken", Check::AtCommitUnguarded)
            .serializable("postgres-serializable-broken");
        expect(
            backend,
            Expect::Catch("could not serialize access"),
            |ctx| async move { cases::renewal_goes_on_during_fenced_work(&*ctx).await },
        )
        .await;
    }
}
