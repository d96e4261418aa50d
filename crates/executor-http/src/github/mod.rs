//! The GitHub API client: REST and GraphQL, one [`GithubClient`] for the whole process,
//! shared by the forge (PRs, checks, reviews: `executor::forge::github`) and the issue source
//! (`executor::sources::github_issues`).
//!
//! | file | holds |
//! |---|---|
//! | `error.rs` | [`GithubError`]: what went wrong, whether it passes, and when to try again |
//! | `rate.rs` | turning a failed response into an error (primary and secondary rate limits, 5xx, 404, …) |
//! | `client.rs` | the client (built on [`crate`]): auth, the ETag and short-lived response caches, pagination, the operations |
//! | `types.rs` | the request and response shapes, as much of them as executor reads |
//!
//! Theory of operation. The runner asks the client about many runs in one tick; the client
//! answers a repeat of the same GET within a short TTL from memory, and after that revalidates
//! with `If-None-Match`, so an unchanged resource costs a 304 that GitHub does not count
//! against the rate limit. A failure is returned as a typed error and never retried here:
//! the affected run waits for a later tick ([`GithubError::retry_at`]) while the other runs go
//! on. After a rate limit the client refuses to send anything to the limited API until the
//! limit lifts (a day at most), so fifty runs do not hammer GitHub fifty times (which can
//! get an integration banned).
//!
//! What it must never do: put the token anywhere but the `Authorization` header of a request
//! to the configured API host (not in a URL, a body, an error, a tracing field, nor a
//! redirect to a log download), or follow a pagination link to another host.

mod client;
mod error;
mod rate;
pub mod types;

pub use client::{ClientOptions, GithubClient, GithubSettings, LogExcerptOptions};
pub use error::{GithubError, GraphQlError};
pub use rate::Quota;
pub use types::{
    nodes, App, Author, CheckConclusion, CheckOutput, CheckRun, CheckRuns, CheckRunsPage,
    CheckStatus, CombinedStatus, CommitStatus, Issue, IssueComment, IssueLabel, IssuePullRequest,
    IssueQuery, IssueState, IssueStateFilter, Job, JobStep, JobsPage, Label, LogExcerpt,
    NewPullRequest, PrBranch, PullRequest, ResolvedThread, Review, ReviewComment, ReviewEvent,
    ReviewThread, ThreadComment, User,
};
