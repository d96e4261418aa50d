//! GitHub as a forge: what a tick over every open PR reads, and the orchestrator's own PR
//! operations, over the one [`GithubClient`] of the process ([`executor_http::github`], shared
//! with the issue source).
//!
//! | file | holds |
//! |---|---|
//! | `batch.rs` | many PRs in one GraphQL query: what a tick over every open PR reads |
//! | `observe.rs` | the observation the `pr` state machine decides from, for many PRs at once or one |
//! | `steps.rs` | the orchestrator's own PR operations a step asks for (draft PR, labels, CI trigger, threads, review, the owner's notice) |
//!
//! What it must never do: put the token anywhere but the `Authorization` header of a request
//! to the configured API host (not in a URL, a body, an error, a tracing field, nor a
//! redirect to a log download), or follow a pagination link to another host.

pub mod batch;
pub mod observe;
pub mod steps;

pub use batch::{PrSnapshot, PRS_PER_QUERY};
pub use executor_http::github::{
    nodes, types, App, Author, CheckConclusion, CheckOutput, CheckRun, CheckRuns, CheckRunsPage,
    CheckStatus, ClientOptions, CombinedStatus, CommitStatus, GithubClient, GithubError,
    GithubSettings, GraphQlError, Issue, IssueComment, IssueLabel, IssuePullRequest, IssueQuery,
    IssueState, IssueStateFilter, Job, JobStep, JobsPage, Label, LogExcerpt, LogExcerptOptions,
    NewPullRequest, PrBranch, PullRequest, Quota, ResolvedThread, Review, ReviewComment,
    ReviewEvent, ReviewThread, ThreadComment, User,
};
/// The token type, from its one home (kept here for the callers that name it so).
pub use executor_http::{Secret, SecretError};
pub use observe::{observe, observe_many, Look};
pub use steps::{review_marker, CiTrigger};
