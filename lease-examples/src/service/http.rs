//! The service's HTTP endpoints: readiness from the lease client's shutdown, liveness from its
//! schedules, and the Prometheus scrape.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use lease_core::{LeaseClient, Scheduled};
use metrics_exporter_prometheus::PrometheusHandle;

#[derive(Clone)]
struct App {
    client: LeaseClient,
    schedules: Vec<Scheduled>,
    metrics: PrometheusHandle,
}

/// `/health/ready`, `/health/live` and `/metrics`, over the client and its `schedules`.
pub(super) fn router(
    client: LeaseClient,
    schedules: Vec<Scheduled>,
    metrics: PrometheusHandle,
) -> Router {
    Router::new()
        .route("/health/ready", get(ready))
        .route("/health/live", get(live))
        .route("/metrics", get(scrape))
        .with_state(App {
            client,
            schedules,
            metrics,
        })
}

/// 200 while every job's schedule runs; 503 naming the ones that stopped (a round that
/// panicked stops its schedule on this instance for good), so that the orchestrator restarts
/// the instance rather than leave a job that no longer runs here, such as this node's uptime
/// checks, which no other instance takes over. During a shutdown, which stops every schedule,
/// it stays 200: the instance is going away by itself.
async fn live(State(app): State<App>) -> (StatusCode, String) {
    let stopped: Vec<String> = app
        .schedules
        .iter()
        .filter(|schedule| schedule.is_stopped())
        .map(|schedule| schedule.name().to_string())
        .collect();
    if stopped.is_empty() || app.client.health().shutting_down {
        (StatusCode::OK, "live\n".to_owned())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not live: stopped {}\n", stopped.join(", ")),
        )
    }
}

/// 200 until the client's shutdown begins, 503 from then on, so the orchestrator sends no new
/// requests to an instance on its way out. The body says how the leases fare (`held`,
/// `overdue`), but their health does not decide it: every instance renews on the same
/// database, so a slow database would make every renewal overdue at once, and readiness tied
/// to it would take every instance out of rotation together, for the jobs' sake, the failure
/// this library exists to avoid. An overdue renewal is for an alert on the metrics
/// (`lease_renewals_total{result="failed"}`), and a lease lost for the jobs to handle.
async fn ready(State(app): State<App>) -> (StatusCode, String) {
    let health = app.client.health();
    let (status, said) = if health.shutting_down {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    } else {
        (StatusCode::OK, "ready")
    };
    let body = format!(
        "{said} held={} overdue={} shutting_down={}\n",
        health.held, health.overdue, health.shutting_down
    );
    (status, body)
}

/// The Prometheus text format of every metric, the lease client's included.
async fn scrape(State(app): State<App>) -> String {
    app.metrics.render()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use lease_core::runtime::TokioRuntime;
    use lease_core::{MemoryStore, Schedule, Ttl};
    use metrics_exporter_prometheus::PrometheusBuilder;

    use super::*;
    use crate::quickstart::killable::Killable;

    /// An overdue renewal (the database stopped answering) leaves the instance ready, saying
    /// so in the body; the shutdown makes it unready.
    #[tokio::test]
    async fn readiness_follows_the_shutdown_not_the_renewals() {
        let store = Killable::new(MemoryStore::new());
        let client = LeaseClient::builder(store.clone(), TokioRuntime)
            .ttl(Ttl::from_secs(2).unwrap())
            .renew_every(Duration::from_millis(200))
            .safety_margin(Duration::from_millis(200))
            .build()
            .unwrap();
        let app = || {
            State(App {
                client: client.clone(),
                schedules: Vec::new(),
                metrics: PrometheusBuilder::new().build_recorder().handle(),
            })
        };
        let guard = client.try_acquire("alerts").await.unwrap().unwrap();
        let (status, body) = ready(app()).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body, "ready held=1 overdue=0 shutting_down=false\n");
        store.kill();
        let overdue = tokio::time::timeout(Duration::from_millis(1_500), async {
            loop {
                let (status, body) = ready(app()).await;
                if body.contains("overdue=1") {
                    return (status, body);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the renewal overdue before the lease's deadline");
        assert_eq!(overdue.0, StatusCode::OK, "{}", overdue.1);
        assert!(overdue.1.starts_with("ready held=1"), "{}", overdue.1);
        drop(guard);
        let _ = client.shutdown(Duration::ZERO).await;
        let (status, body) = ready(app()).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(body.starts_with("not ready") && body.ends_with("shutting_down=true\n"));
    }

    /// A job whose round panics stops its schedule for good: liveness then answers 503 naming
    /// it, where a schedule that runs (the control) keeps it 200.
    #[tokio::test]
    async fn a_stopped_schedule_fails_liveness() {
        let client = LeaseClient::new(MemoryStore::new(), TokioRuntime);
        let every = || Schedule::every(Duration::from_millis(10)).unwrap();
        let running = client.schedule("steady", every(), |_| async {}).unwrap();
        let app = |schedules: Vec<Scheduled>| App {
            client: client.clone(),
            schedules,
            metrics: PrometheusBuilder::new().build_recorder().handle(),
        };
        let (status, body) = live(State(app(vec![running.clone()]))).await;
        assert_eq!(status, StatusCode::OK, "{body}");

        let panicking = client
            .schedule("flaky", every(), |_| async { panic!("a job's bug") })
            .unwrap();
        tokio::time::timeout(Duration::from_secs(10), async {
            while !panicking.is_stopped() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the schedule whose round panicked stopped");
        let (status, body) = live(State(app(vec![running, panicking]))).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body, "not live: stopped flaky\n");
    }
}
