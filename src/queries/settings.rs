//! The vault's write settings (policy and budget), as every surface reads them; they are
//! changed through `writes::review::set_settings`.

pub use crate::config::ReviewDecisions;
use crate::error::Result;
use crate::state::State;

/// Who decides whether a write applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WritePolicy {
    /// Every write applies at once (the default in local mode).
    AutoApply,
    /// Every write is queued for a reviewer.
    Review,
    /// Delete, move and rename are queued; other writes apply.
    ReviewDestructive,
    /// Every write is refused (`WRITE_REFUSED`).
    ReadOnly,
}

impl WritePolicy {
    pub const ALL: [WritePolicy; 4] = [
        WritePolicy::AutoApply,
        WritePolicy::Review,
        WritePolicy::ReviewDestructive,
        WritePolicy::ReadOnly,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WritePolicy::AutoApply => "auto_apply",
            WritePolicy::Review => "review",
            WritePolicy::ReviewDestructive => "review_destructive",
            WritePolicy::ReadOnly => "read_only",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// The vault's write settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteSettings {
    pub policy: WritePolicy,
    /// Applied writes allowed per rolling hour; 0 is unlimited.
    pub budget: u32,
}

/// The settings [`WriteSettings`] is read from, in the order [`settings_of`] takes them.
pub const WRITE_SETTINGS: [&str; 2] = ["write_policy", "write_budget"];

/// The write settings as stored (auto-apply and no budget when unset).
pub fn settings(state: &State) -> Result<WriteSettings> {
    Ok(settings_of(state.meta.settings(&WRITE_SETTINGS)?))
}

/// The write settings of the stored values of [`WRITE_SETTINGS`].
pub fn settings_of(stored: Vec<Option<String>>) -> WriteSettings {
    let mut read = stored.into_iter();
    let policy = read
        .next()
        .flatten()
        .and_then(|p| WritePolicy::parse(&p))
        .unwrap_or(WritePolicy::AutoApply);
    let budget = read
        .next()
        .flatten()
        .and_then(|b| b.parse().ok())
        .unwrap_or(0);
    WriteSettings { policy, budget }
}

/// Who takes review decisions in open local mode: `signed_in` when the configuration says
/// so (the console cannot loosen that) or the vault's setting does (`serve --review`, the
/// console's switch); else `anyone`.
pub fn review_decisions(state: &State) -> Result<ReviewDecisions> {
    if state.config.review_decisions == ReviewDecisions::SignedIn {
        return Ok(ReviewDecisions::SignedIn);
    }
    Ok(state
        .meta
        .setting("review_decisions")?
        .and_then(|v| ReviewDecisions::parse(&v))
        .unwrap_or_default())
}
