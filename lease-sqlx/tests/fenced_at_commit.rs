//! The suite's fenced cases with the check at the commit (`lease_sqlx::commit_fenced`), on every
//! database: what the conformance suites run with the check at the start, and the two cases
//! that tell the two apart.
#![cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]

mod common;

use common::Backend;
use common::fenced::{Check, Expect, expect};
use lease_sqlx::sqlx::{MySql, Postgres, Sqlite};
use lease_tests::cases;

/// One test per database for `case`, with fenced writes checked at their commit.
macro_rules! at_commit {
    ($case:ident) => {
        mod $case {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let backend = Backend::<Postgres>::plain().checking("postgres", Check::AtCommit);
                expect(backend, Expect::Pass, |ctx| async move {
                    cases::$case(&*ctx).await
                })
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mariadb() {
                let backend = Backend::<MySql>::plain().checking("mariadb", Check::AtCommit);
                expect(backend, Expect::Pass, |ctx| async move {
                    cases::$case(&*ctx).await
                })
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let backend = Backend::<Sqlite>::plain().checking("sqlite", Check::AtCommit);
                expect(backend, Expect::Pass, |ctx| async move {
                    cases::$case(&*ctx).await
                })
                .await;
            }
        }
    };
}

at_commit!(fenced_write_commits_while_held);
at_commit!(expired_lease_fails_fenced_check);
at_commit!(stale_fenced_write_commits_nothing);
at_commit!(takeover_during_fenced_work_commits_nothing);
at_commit!(renewal_goes_on_during_fenced_work);
