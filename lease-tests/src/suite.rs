//! [`conformance_suite!`]: one named test per case, per backend.

/// Writes a module of tests, one per conformance case, that run the case against a backend on
/// the runtime it names (`tokio` or `async_std`, with the matching `runtime-*` feature).
///
/// ```
/// use lease_tests::{DynBackend, MemoryBackend};
///
/// lease_tests::conformance_suite!(mod memory_tokio, runtime = tokio, backend = MemoryBackend);
/// lease_tests::conformance_suite!(
///     mod memory_dyn_async_std,
///     runtime = async_std,
///     backend = DynBackend::new(MemoryBackend),
/// );
/// # fn main() {}
/// ```
///
/// Attributes written before `mod` go on every test of the module, such as
/// `#[ignore = "..."]` for a suite that a driver runs on purpose under changed conditions (the
/// clock-skew scenario runs one under a shifted wall clock with `--ignored`).
///
/// `cargo test` then lists `memory_tokio::one_holder_among_contenders`,
/// `memory_tokio::no_connection_held` and so on. The backend expression is evaluated in each
/// test (inside the module, which sees the items of the one around it), so keep it cheap.
#[macro_export]
macro_rules! conformance_suite {
    ($(#[$attr:meta])* mod $module:ident, runtime = $runtime:ident, backend = $backend:expr $(,)?) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;

            $crate::__conformance_cases!(
                [$(#[$attr])*]
                $runtime,
                $backend;
                one_holder_among_contenders,
                one_winner_on_every_takeover,
                holder_cannot_take_its_own_lease_twice,
                expired_lease_is_taken_over,
                no_takeover_before_the_expiry,
                renewed_lease_is_never_taken_over,
                expired_lease_cannot_be_renewed,
                release_with_min_hold_keeps_the_lease,
                late_renewal_keeps_the_minimum_hold,
                longest_ttls_and_holds_are_kept_whole,
                stale_holder_touches_nothing,
                fences_strictly_increase,
                fences_keep_counting_across_releases,
                prune_deletes_only_rows_free_longer_than_the_bound,
                renew_many_reports_exactly_the_lost,
                renew_many_across_batches_duplicates_and_losses,
                inspect_and_list_agree,
                names_round_trip_verbatim,
                names_are_byte_exact_and_listed_in_byte_order,
                acquire_waits_for_the_release,
                release_wakes_a_waiter,
                releases_are_pushed_only_when_they_free_the_lease,
                listening_takes_no_connection_of_the_pool,
                campaign_takes_over_when_the_leader_resigns,
                shutdown_hands_every_lease_over,
                schedule_runs_each_round_on_one_instance,
                schedule_on_leader_runs_each_round_on_the_leader,
                acquire_rides_out_a_store_outage,
                stats_and_health_follow_the_store,
                lost_signal_after_takeover,
                guard_loses_lease_when_store_refuses,
                guard_loses_lease_when_store_hangs,
                no_connection_held,
                unreachable_store_returns_errors,
                fenced_write_commits_while_held,
                expired_lease_fails_fenced_check,
                freed_lease_fails_fenced_check,
                stale_fenced_write_commits_nothing,
                takeover_waits_for_fenced_transaction,
                takeover_during_fenced_work_commits_nothing,
                renewal_goes_on_during_fenced_work,
                fenced_work_spans_a_renewal,
            );
        }
    };
}

/// One `#[test]` per case named in the list; the list lives in [`conformance_suite!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases {
    ($attrs:tt $runtime:ident, $backend:expr; $($case:ident),+ $(,)?) => {
        $(
            $crate::__conformance_case!($attrs $runtime, $backend, $case);
        )+
    };
}

/// One `#[test]` with the suite's attributes: a macro of its own, because the attributes repeat
/// independently of the cases.
#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_case {
    ([$($attr:tt)*] $runtime:ident, $backend:expr, $case:ident) => {
        $($attr)*
        #[test]
        fn $case() {
            $crate::run::$runtime(stringify!($case), $backend, |ctx| async move {
                $crate::cases::$case(&*ctx).await
            });
        }
    };
}
