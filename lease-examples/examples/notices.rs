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
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("the demo failed: {}", lease_core::ErrorChain(&*error));
            ExitCode::FAILURE
        }
    }
}
