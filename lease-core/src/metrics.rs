//! The client's statistics as metrics, through the `metrics` facade: every name and label in
//! one place. The names are part of the crate's stable interface; the crate docs list them.

use std::time::Duration;

use metrics::{counter, gauge, histogram};

use crate::stats::{Acquired, CallOutcome, Renewed, operation_label};
use crate::{FencedCheck, LossReason, Operation};

/// `lease_acquisitions_total{lease, store, result}`: result `won`, `skipped` or `failed`.
pub(crate) const ACQUISITIONS: &str = "lease_acquisitions_total";
/// `lease_renewals_total{lease, store, result}`: result `renewed`, `late`, `failed` or
/// `rejected`, one per lease per round.
pub(crate) const RENEWALS: &str = "lease_renewals_total";
/// `lease_releases_total{lease, store}`: leases given back.
pub(crate) const RELEASES: &str = "lease_releases_total";
/// `lease_losses_total{lease, store, reason}`: reason `rejected`, `deadline_passed`,
/// `not_held` or `shut_down`.
pub(crate) const LOSSES: &str = "lease_losses_total";
/// `lease_fenced_checks_total{lease, store, result}`: result `passed`, `not_held`, `failed` or
/// `unknown`.
pub(crate) const FENCED_CHECKS: &str = "lease_fenced_checks_total";
/// `lease_held{lease, store}`: 1 while this client holds the lease, 0 once it does not. Counted
/// up and down per holding, so a lost holding let go after the same name was acquired again
/// leaves it at 1.
pub(crate) const HELD: &str = "lease_held";
/// `lease_store_call_duration_seconds{store, operation, outcome}`: operation `acquire`,
/// `renew_many`, `release` or `subscribe`; outcome `ok`, `error` or `timeout`.
pub(crate) const STORE_CALL_DURATION: &str = "lease_store_call_duration_seconds";

/// The label value of a loss reason.
pub(crate) fn reason_label(reason: LossReason) -> &'static str {
    match reason {
        LossReason::Rejected => "rejected",
        LossReason::DeadlinePassed => "deadline_passed",
        LossReason::NotHeld => "not_held",
        LossReason::ShutDown => "shut_down",
        // Never counted (a campaign's give-back is a release): named all the same.
        LossReason::Resigned => "resigned",
    }
}

pub(crate) fn call(store: &str, operation: Operation, took: Duration, outcome: CallOutcome) {
    histogram!(
        STORE_CALL_DURATION,
        "store" => store.to_owned(),
        "operation" => operation_label(operation),
        "outcome" => outcome.as_str(),
    )
    .record(took.as_secs_f64());
}

pub(crate) fn acquired(store: &str, lease: &str, acquired: Acquired) {
    let result = match acquired {
        Acquired::Won => "won",
        Acquired::Skipped => "skipped",
        Acquired::Failed => "failed",
    };
    counter!(
        ACQUISITIONS,
        "lease" => lease.to_owned(),
        "store" => store.to_owned(),
        "result" => result,
    )
    .increment(1);
}

pub(crate) fn renewed(store: &str, lease: &str, renewed: Renewed) {
    let result = match renewed {
        Renewed::InTime => "renewed",
        Renewed::Late => "late",
        Renewed::Failed => "failed",
        Renewed::Rejected => "rejected",
    };
    counter!(
        RENEWALS,
        "lease" => lease.to_owned(),
        "store" => store.to_owned(),
        "result" => result,
    )
    .increment(1);
}

pub(crate) fn released(store: &str, lease: &str) {
    counter!(
        RELEASES,
        "lease" => lease.to_owned(),
        "store" => store.to_owned(),
    )
    .increment(1);
}

pub(crate) fn lost(store: &str, lease: &str, reason: LossReason) {
    counter!(
        LOSSES,
        "lease" => lease.to_owned(),
        "store" => store.to_owned(),
        "reason" => reason_label(reason),
    )
    .increment(1);
}

pub(crate) fn fenced_check(store: &str, lease: &str, check: FencedCheck) {
    counter!(
        FENCED_CHECKS,
        "lease" => lease.to_owned(),
        "store" => store.to_owned(),
        "result" => check.label(),
    )
    .increment(1);
}

pub(crate) fn holding(store: &str, lease: &str, holding: bool) {
    gauge!(
        HELD,
        "lease" => lease.to_owned(),
        "store" => store.to_owned(),
    )
    .increment(if holding { 1.0 } else { -1.0 });
}
