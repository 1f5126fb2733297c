//! [`LeaseClient::campaign`]: leader election on one lease, run by a [`Leader`].

use futures::future::BoxFuture;

use crate::shutdown::Kind;
use crate::{Error, IntoLeaseName, Leader, LeaseClient};

impl LeaseClient {
    /// Starts campaigning for leadership on `name`, on a task of the runtime.
    ///
    /// While another process leads, the campaign tries again every
    /// [`campaign_retry`](crate::LeaseConfig::campaign_retry) (at most 5 s by default), and at
    /// once when the store pushes the leader's release. The campaign ends, giving leadership
    /// back, when the client's [`shutdown`](LeaseClient::shutdown) begins.
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::ShuttingDown`] once the client's shutdown has begun;
    /// [`Error::InvalidConfig`] when the runtime cannot spawn (use
    /// [`campaign_on_this_task`](LeaseClient::campaign_on_this_task) then).
    pub fn campaign(&self, name: impl IntoLeaseName) -> Result<Leader, Error> {
        let (leader, campaign) = self.campaign_on_this_task(name)?;
        self.clock()
            .runtime()
            .spawn(campaign)
            .map_err(|_| Error::InvalidConfig {
                reason: "leader election on a runtime that cannot spawn: poll the campaign future of campaign_on_this_task instead".to_owned(),
            })?;
        Ok(leader)
    }

    /// The [`Leader`] for `name` and the campaign future that runs the election; poll it on a
    /// task of your own. It ends when every `Leader` clone is dropped or resigns, or when the
    /// client's [`shutdown`](LeaseClient::shutdown) begins. Keep polling it through a shutdown,
    /// or drop it first: a campaign kept but no longer polled cannot end, so the shutdown waits
    /// its whole grace period for it (and then gives its lease back itself).
    ///
    /// # Errors
    /// [`Error::InvalidName`]; [`Error::ShuttingDown`] once the client's shutdown has begun.
    pub fn campaign_on_this_task(
        &self,
        name: impl IntoLeaseName,
    ) -> Result<(Leader, BoxFuture<'static, ()>), Error> {
        let name = name.into_lease_name()?;
        let token = self.enter(Kind::Campaign, &name)?;
        Ok(Leader::elect(self.clone(), name, token))
    }
}
