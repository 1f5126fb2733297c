//! The service's HTTP endpoints: readiness from the lease client's health, liveness from its
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

/// 200 while every held lease is renewed in time and the client is not shutting down; 503
/// otherwise, so a load balancer takes the instance out before its leases are lost. Once they
/// are lost (their deadlines passed while the database was unreachable), the client holds
/// nothing and this reads ready again: whether the instance can serve without its database is
/// for a check of its own requests to say, not the leases'.
async fn ready(State(app): State<App>) -> (StatusCode, String) {
    let health = app.client.health();
    let status = if health.is_healthy() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = format!(
        "{} held={} overdue={} shutting_down={}\n",
        if health.is_healthy() {
            "ready"
        } else {
            "not ready"
        },
        health.held,
        health.overdue,
        health.shutting_down
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
    use lease_core::{MemoryStore, Schedule};
    use metrics_exporter_prometheus::PrometheusBuilder;

    use super::*;

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
