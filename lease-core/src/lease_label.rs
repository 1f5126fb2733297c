//! [`LeaseLabel`]: what the `lease` label of a client's metrics carries.

use crate::LeaseName;

/// What the `lease` label of a client's metrics carries (feature `metrics`); set with
/// [`LeaseClientBuilder::lease_label`](crate::LeaseClientBuilder::lease_label).
///
/// Every distinct label value is a set of series a metrics recorder keeps for the life of the
/// process, a gauge included after it falls back to 0. A client that takes a fixed set of
/// jobs labels each by its name; one that takes a lease per entity (`check:{customer}`, or
/// [`LeaseName::per_node`]'s `uptime:{node}` on a large fleet) labels them by their kind, so
/// the series stay as few as the kinds of work.
///
/// ```
/// use lease_core::{LeaseLabel, LeaseName};
///
/// let name = LeaseName::per_node("uptime", "node-a")?;
/// assert_eq!(LeaseLabel::Name.of(&name), "uptime:node-a");
/// assert_eq!(LeaseLabel::Kind.of(&name), "uptime");
/// # Ok::<(), lease_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseLabel {
    /// The lease's whole name: one set of series per name. The default.
    #[default]
    Name,
    /// The name up to its first `:`, or the whole name when it has none: one set of series
    /// per kind of work. The `lease_held` gauge then counts this client's leases of that
    /// kind.
    Kind,
}

impl LeaseLabel {
    /// The label value of `name`.
    pub fn of(self, name: &LeaseName) -> &str {
        let name = name.as_str();
        match self {
            Self::Name => name,
            Self::Kind => name.split_once(':').map_or(name, |(kind, _)| kind),
        }
    }
}
