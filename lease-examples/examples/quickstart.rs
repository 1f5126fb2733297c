//! Three instances share one SQLite file and run the four jobs of the design story on a
//! compressed clock; one is killed midway. Ends by itself within about 30 seconds.
//!
//! ```sh
//! cargo run --example quickstart
//! ```

use std::process::ExitCode;

use lease_examples::quickstart::{self, Settings};

#[tokio::main]
async fn main() -> ExitCode {
    match quickstart::run(Settings::default(), std::io::stdout()).await {
        Ok(summary) if summary.is_clean() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("quickstart failed: {}", lease_core::ErrorChain(&*error));
            ExitCode::FAILURE
        }
    }
}
