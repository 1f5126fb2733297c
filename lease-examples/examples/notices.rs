//! A job whose second run does damage, sending a customer a notice, run twice by a paused
//! instance and its successor: without the fenced check the notice goes out twice, with it once.
//! Runs on SQLite, with nothing to set up.
//!
//! ```sh
//! cargo run --example notices
//! ```

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    match lease_examples::notices::run().await {
        Ok(outcome) => {
            print!("{outcome}");
            if outcome.is_the_story() {
                ExitCode::SUCCESS
            } else {
                eprintln!(
                    "the demo did not show its story: expected two notices without the check, \
                     one with it, and the resumed instance told its lease is no longer held"
                );
                ExitCode::FAILURE
            }
        }
        Err(error) => {
            eprintln!("the demo failed: {}", lease_core::ErrorChain(&*error));
            ExitCode::FAILURE
        }
    }
}
