//! The suite's fenced cases with the check at the commit (`lease_sqlx::commit_fenced`), on every
//! database: what the conformance suites run with the check at the start, and the two cases
//! that tell the two apart.
#![cfg(all(feature = "postgres", feature = "mysql", feature = "sqlite"))]

mod common;

use std::future::Future;
use std::sync::Arc;

use common::Backend;
use common::fenced::Check;
use lease_core::runtime::TokioRuntime;
use lease_sqlx::sqlx::{MySql, Postgres, Sqlite};
use lease_tests::run::run_case;
use lease_tests::{CaseResult, Context, TestBackend, Verdict, cases, env};

/// Runs `case` against `backend` and fails the test unless the case passed.
async fn passes<B, F, Fut>(backend: B, case: F)
where
    B: TestBackend,
    F: FnOnce(Arc<Context<B>>) -> Fut,
    Fut: Future<Output = CaseResult>,
{
    let name = backend.name().to_owned();
    if let Err(why) = backend.available().await {
        return env::skip_or_fail(&name, &why.to_string());
    }
    match run_case(backend, TokioRuntime, case).await {
        Ok(Verdict::Passed) => {}
        Ok(other) => panic!("{name}: the case gave {other:?}"),
        Err(failure) => panic!("{name}: {failure}"),
    }
}

/// One test per database for `case`, with fenced writes checked at their commit.
macro_rules! at_commit {
    ($case:ident) => {
        mod $case {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let backend = Backend::<Postgres>::plain().checking("postgres", Check::AtCommit);
                passes(backend, |ctx| async move { cases::$case(&*ctx).await }).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mariadb() {
                let backend = Backend::<MySql>::plain().checking("mariadb", Check::AtCommit);
                passes(backend, |ctx| async move { cases::$case(&*ctx).await }).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let backend = Backend::<Sqlite>::plain().checking("sqlite", Check::AtCommit);
                passes(backend, |ctx| async move { cases::$case(&*ctx).await }).await;
            }
        }
    };
}

at_commit!(fenced_write_commits_while_held);
at_commit!(expired_lease_fails_fenced_check);
at_commit!(stale_fenced_write_commits_nothing);
at_commit!(takeover_during_fenced_work_commits_nothing);
at_commit!(renewal_goes_on_during_fenced_work);
