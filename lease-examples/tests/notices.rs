//! The notices demo shows what it claims: without the fenced check the paused instance sends
//! the notice a second time; with it, the customer gets one and the paused instance is told its
//! lease is gone.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fenced_check_keeps_a_paused_instance_from_sending_twice() {
    let outcome = lease_examples::notices::run().await.unwrap();
    assert_eq!(outcome.unfenced, 2, "the negative control: {outcome}");
    assert_eq!(outcome.fenced, 1, "{outcome}");
    assert!(
        outcome.refused.contains("no longer held"),
        "the resumed instance was told: {}",
        outcome.refused
    );
    assert!(outcome.is_the_story(), "{outcome}");
    let control = lease_examples::notices::Outcome {
        fenced: 2,
        ..outcome
    };
    assert!(
        !control.is_the_story(),
        "a notice sent twice is no story: {control}"
    );
}
