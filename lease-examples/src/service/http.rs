//! The service's HTTP endpoints: readiness from the lease client's health, liveness, and the
//! Prometheus scrape.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use lease_core::LeaseClient;
use metrics_exporter_prometheus::PrometheusHandle;

#[derive(Clone)]
struct App {
    client: LeaseClient,
    metrics: PrometheusHandle,
}

/// `/health/ready`, `/health/live` and `/metrics`.
pub(super) fn router(client: LeaseClient, metrics: PrometheusHandle) -> Router {
    Router::new()
        .route("/health/ready", get(ready))
        .route("/health/live", get(|| async { "live\n" }))
        .route("/metrics", get(scrape))
        .with_state(App { client, metrics })
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
