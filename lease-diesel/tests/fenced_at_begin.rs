//! The suite's fenced cases with the whole transaction through
//! `lease_diesel::fenced_with(.., CheckAt::Begin, ..)` (the check with the `BEGIN`, in one
//! message; on PostgreSQL the prepared check), on every database: the row stays locked while
//! the work runs, so a takeover waits for it. And `lease_diesel::fenced` on PostgreSQL
//! connections that are `SERIALIZABLE` by default, where it checks with the `BEGIN` by itself.

mod support;

use diesel_async::pooled_connection::{bb8, deadpool};
use diesel_async::{AsyncMysqlConnection, AsyncPgConnection};
use lease_core::runtime::TokioRuntime;
use lease_diesel::AsyncSqliteConnection;
use lease_tests::run::run_case;
use lease_tests::{TestBackend, Verdict, cases, env};
use support::{Backend, MariaDb, Postgres, Sqlite};

/// One test per database for `case`.
macro_rules! at_begin {
    ($case:ident) => {
        mod $case {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                passes(
                    Backend::<Postgres, deadpool::Pool<AsyncPgConnection>>::new()
                        .through_fenced_at_begin(),
                    |ctx| async move { cases::$case(&*ctx).await },
                )
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn mariadb() {
                passes(
                    Backend::<MariaDb, deadpool::Pool<AsyncMysqlConnection>>::new()
                        .through_fenced_at_begin(),
                    |ctx| async move { cases::$case(&*ctx).await },
                )
                .await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                passes(
                    Backend::<Sqlite, deadpool::Pool<AsyncSqliteConnection>>::new()
                        .through_fenced_at_begin(),
                    |ctx| async move { cases::$case(&*ctx).await },
                )
                .await;
            }
        }
    };
}

/// Runs `case` against `backend` and fails the test unless it passed.
async fn passes<B, F, Fut>(backend: B, case: F)
where
    B: TestBackend,
    F: FnOnce(std::sync::Arc<lease_tests::Context<B>>) -> Fut,
    Fut: std::future::Future<Output = lease_tests::CaseResult>,
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

at_begin!(fenced_write_commits_while_held);
at_begin!(expired_lease_fails_fenced_check);
at_begin!(stale_fenced_write_commits_nothing);
at_begin!(takeover_waits_for_fenced_transaction);
at_begin!(fenced_work_spans_a_renewal);

/// Through `lease_diesel::fenced` on PostgreSQL connections whose transactions are
/// `SERIALIZABLE` by default: the transaction reads from a snapshot, so it checks with the
/// `BEGIN` (a takeover waits for it), and a renewal that falls into it costs nothing.
mod under_snapshot {
    use super::*;

    /// One test for `case`, on a bb8 pool as the conformance suite's `fenced` runs.
    macro_rules! serializable {
        ($case:ident) => {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                passes(
                    Backend::<Postgres, bb8::Pool<AsyncPgConnection>>::new()
                        .through_fenced()
                        .serializable(),
                    |ctx| async move { cases::$case(&*ctx).await },
                )
                .await;
            }
        };
    }

    serializable!(fenced_write_commits_while_held);
    serializable!(expired_lease_fails_fenced_check);
    serializable!(stale_fenced_write_commits_nothing);
    serializable!(takeover_waits_for_fenced_transaction);
    serializable!(fenced_work_spans_a_renewal);
}
