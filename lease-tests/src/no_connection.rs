//! For tests of a store whose pool gives no connection (a server that refuses, one that never
//! answers, a pool whose connections are all in use): a port nothing listens on, and the check
//! every such answer must pass, whatever the driver.

use std::io;
use std::time::{Duration, Instant};

use lease_core::{Error, ErrorChain, StoreErrorKind};

use crate::CaseFailure;

/// A port on 127.0.0.1 that nothing listened on a moment ago: a server there refuses
/// connections.
///
/// # Errors
/// The operating system's error when no port could be bound.
pub fn closed_port() -> io::Result<u16> {
    crate::server::process::free_port()
}

/// The error of `answer`, a store's answer begun at `started` without a connection: it must be
/// an error, come within `bound`, and be [transient](StoreErrorKind::Transient) (a connection
/// may be had on the next try).
///
/// # Errors
/// A [`CaseFailure`] naming what was wrong: an answer that succeeded, came late, or was
/// classified otherwise.
pub fn transient_within<T>(
    answer: Result<T, Error>,
    started: Instant,
    bound: Duration,
) -> Result<Error, CaseFailure> {
    let elapsed = started.elapsed();
    let Err(error) = answer else {
        return Err(CaseFailure::new(
            "the store answered without a connection to answer from",
        ));
    };
    if elapsed >= bound {
        return Err(CaseFailure::new(format!(
            "the store's error came after {elapsed:?}, not within {bound:?}: {}",
            ErrorChain(&error)
        )));
    }
    if error.store_error_kind() != Some(StoreErrorKind::Transient) {
        return Err(CaseFailure::new(format!(
            "the store's error is classified {:?}, not transient: {}",
            error.store_error_kind(),
            ErrorChain(&error)
        )));
    }
    Ok(error)
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::time::{Duration, Instant};

    use lease_core::{Error, Operation, StoreErrorKind};

    use super::{closed_port, transient_within};

    fn refused(kind: StoreErrorKind) -> Result<(), Error> {
        let cause = io::Error::from(io::ErrorKind::ConnectionRefused);
        Err(Error::store_of_kind(Operation::Inspect, None, kind, cause))
    }

    #[test]
    fn a_transient_error_in_time_passes() {
        let error = transient_within(
            refused(StoreErrorKind::Transient),
            Instant::now(),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(error.store_error_kind(), Some(StoreErrorKind::Transient));
    }

    #[test]
    fn an_answer_a_late_error_and_another_kind_fail() {
        let bound = Duration::from_secs(10);
        let failure = transient_within(Ok(()), Instant::now(), bound).unwrap_err();
        assert!(
            failure.message().contains("without a connection"),
            "{failure}"
        );
        let long_ago = Instant::now() - 2 * bound;
        let failure =
            transient_within(refused(StoreErrorKind::Transient), long_ago, bound).unwrap_err();
        assert!(failure.message().contains("not within"), "{failure}");
        let failure = transient_within(refused(StoreErrorKind::Permanent), Instant::now(), bound)
            .unwrap_err();
        assert!(failure.message().contains("Permanent"), "{failure}");
    }

    #[test]
    fn nothing_listens_on_a_closed_port() {
        let port = closed_port().unwrap();
        let refused = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::ConnectionRefused);
    }
}
