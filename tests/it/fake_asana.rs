//! A stateful fake Asana for the tests: the paths of the real API under `/api/1.0`, with
//! bodies shaped like `../shared/fixtures/http/asana/` and changed as its state changes.
//!
//! [`FakeAsana::start`] is seeded with the fixtures' story (workspace `lumen.dev`, project
//! `Lumen Browser — Backlog` with sections `Ready for executor` and `In progress`, and the
//! three tasks of `project_tasks.json`, task `1209876543210987` as `task.json` shows it);
//! [`FakeAsana::seed_sections`] adds any number of generated tasks. It reproduces what the
//! fixtures README lists: the `{"data": …}` envelope; `opt_fields` trimming a record to `gid`
//! plus the paths asked for; `limit` 1–100 with opaque, query-bound offsets and
//! `next_page {offset, path, uri}` or `null` on the last page; `errors[]` bodies, `401`
//! "Not Authorized" for a wrong token, `429` with `Retry-After`. `modified_since` (on
//! `GET /tasks` only, as Asana documents it) keeps tasks modified at or after the time;
//! `completed_since` keeps incomplete tasks and those completed since. Every change to a
//! task (an edit, a comment) moves its `modified_at`, as Asana counts "adding stories" as a
//! modification. Time is the fake's own clock, one second per change, starting after the
//! fixtures' story.
//!
//! It is stricter than Asana is known to be in one way: a query parameter an endpoint does
//! not document (say `modified_since` on `/projects/{gid}/tasks`) or an unknown
//! `opt_fields` path is a 400, so a client is held to what each endpoint offers. The texts
//! of those 400s are the fake's own.
//!
//! It records every request (method, path, query, headers without `Authorization`, body,
//! and the `Authorization` value apart) so a test can count calls and prove where the token
//! went. Faults are injected for the next N requests.
//!
//! What it must never do: reach the network (it listens on 127.0.0.1 and opens nothing), or
//! panic on what a client sends: an unreadable body gets a 400.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::Router;
use chrono::{DateTime, SecondsFormat, TimeZone, Utc};
use executor::sources::asana::{AsanaSettings, Secret};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::fake_server::FakeServer;

/// The personal access token the fake accepts; distinctive, so a test can search for it.
pub const TOKEN: &str = "2/1209511000000042/1213900000000001:FAKEasanaPATsecret7f3e";
pub const WORKSPACE: &str = "1201987654321098";
pub const PROJECT: &str = "1209512345678901";
pub const PROJECT_NAME: &str = "Lumen Browser — Backlog";
pub const SECTION_READY: &str = "1209512345678905";
pub const SECTION_IN_PROGRESS: &str = "1209512345678907";
/// The fixtures' task: "Tab preview stuck after pointer leaves tab strip".
pub const TASK: &str = "1209876543210987";
/// The owner, Marek Kowalski.
pub const OWNER_GID: &str = "1201987654320001";
/// The user the token belongs to (`me`): the executor's own Asana user, who wrote the
/// fixtures' comment.
pub const ME_GID: &str = "1209511000000042";
pub const ME_NAME: &str = "Lumen Executor";
/// The path of the API below the host.
pub const API_PATH: &str = "/api/1.0";

const HELP: &str = "For more information on API status codes and how to handle them, read the docs on errors: https://developers.asana.com/docs/errors";

/// A fixture file's text.
pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/fixtures/http/asana")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

pub fn fixture_json(name: &str) -> Value {
    serde_json::from_str(&fixture(name)).unwrap_or_else(|e| panic!("parse {name}: {e}"))
}

/// What a generated task looks like.
#[derive(Clone, Debug, Default)]
pub struct TaskSeed {
    pub name: String,
    pub notes: String,
    /// Tag names (a tag is created on first use).
    pub tags: Vec<String>,
    /// `(gid, name)`.
    pub assignee: Option<(String, String)>,
    pub completed: bool,
}

impl TaskSeed {
    pub fn new(name: &str, notes: &str) -> Self {
        Self {
            name: name.into(),
            notes: notes.into(),
            ..Self::default()
        }
    }

    /// "Generated task {i}", with a line of notes; untagged, unassigned, incomplete.
    pub fn numbered(i: usize) -> Self {
        Self::new(
            &format!("Generated task {i}"),
            &format!("Notes of generated task {i}."),
        )
    }

    pub fn tag(mut self, name: &str) -> Self {
        self.tags.push(name.into());
        self
    }

    pub fn assignee(mut self, gid: &str, name: &str) -> Self {
        self.assignee = Some((gid.into(), name.into()));
        self
    }

    pub fn completed(mut self) -> Self {
        self.completed = true;
        self
    }
}

/// What [`FakeAsana::seed_sections`] made.
#[derive(Clone, Debug)]
pub struct Backlog {
    pub project: String,
    pub sections: Vec<String>,
    /// Every task's gid, in the order made (section by section).
    pub tasks: Vec<String>,
}

/// A failure served instead of the real answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// 429 with `Retry-After` (or none) and Asana's body.
    RateLimited { retry_after: Option<u64> },
    /// This status with an Asana-shaped body (a 5xx with a `phrase`).
    Status(u16),
    /// The real answer, this much later (for client timeouts).
    Delay(Duration),
    /// 200 with a body that is not JSON.
    NotJson,
}

/// One request as the fake saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    /// Below the host, `/api/1.0` included.
    pub path: String,
    pub query: String,
    /// Every header but `Authorization`, names lower-case.
    pub headers: Vec<(String, String)>,
    /// The `Authorization` header, kept apart so tests can say where the token went.
    pub authorization: Option<String>,
    pub body: String,
    pub status: u16,
}

impl Recorded {
    /// A query parameter, decoded.
    pub fn param(&self, name: &str) -> Option<String> {
        url::form_urlencoded::parse(self.query.as_bytes())
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.into_owned())
    }
}

#[derive(Clone)]
struct FakeTask {
    gid: String,
    name: String,
    notes: String,
    completed: bool,
    completed_at: Option<DateTime<Utc>>,
    assignee: Option<(String, String)>,
    /// `(project gid, section gid)`, one per project.
    memberships: Vec<(String, String)>,
    /// `(gid, name)`.
    tags: Vec<(String, String)>,
    custom_fields: Value,
    created_at: DateTime<Utc>,
    modified_at: DateTime<Utc>,
}

struct Offset {
    /// The query it belongs to: Asana wants the offset back with the same query.
    query_key: String,
    position: usize,
}

struct FaultRule {
    fault: Fault,
    path_contains: Option<String>,
}

struct StateData {
    me: (String, String),
    workspace_name: String,
    /// `gid → name`, in creation order.
    projects: Vec<(String, String)>,
    /// `(gid, name, project gid)`, in creation order.
    sections: Vec<(String, String, String)>,
    /// In creation order, which is every list's order.
    tasks: Vec<FakeTask>,
    tag_gids: HashMap<String, String>,
    stories: BTreeMap<String, Vec<Value>>,
    offsets: HashMap<String, Offset>,
    offsets_issued: u64,
    endless_pages: bool,
    /// How many of the next requests that send an offset find every offset expired.
    expire_offsets: usize,
    now: DateTime<Utc>,
    next_gid: u64,
    faults: VecDeque<FaultRule>,
    requests: Vec<Recorded>,
}

impl StateData {
    fn new(now: DateTime<Utc>) -> Self {
        Self {
            me: (ME_GID.to_owned(), ME_NAME.to_owned()),
            workspace_name: "lumen.dev".to_owned(),
            projects: Vec::new(),
            sections: Vec::new(),
            tasks: Vec::new(),
            tag_gids: HashMap::new(),
            stories: BTreeMap::new(),
            offsets: HashMap::new(),
            offsets_issued: 0,
            endless_pages: false,
            expire_offsets: 0,
            now,
            next_gid: 1_213_000_000_000_000,
            faults: VecDeque::new(),
            requests: Vec::new(),
        }
    }

    /// The fake clock moves a second per change, so every change has its own time.
    fn tick(&mut self) -> DateTime<Utc> {
        self.now += chrono::Duration::seconds(1);
        self.now
    }

    fn new_gid(&mut self) -> String {
        self.next_gid += 1;
        self.next_gid.to_string()
    }

    fn tag_gid(&mut self, name: &str) -> String {
        if let Some(gid) = self.tag_gids.get(name) {
            return gid.clone();
        }
        let gid = self.new_gid();
        self.tag_gids.insert(name.to_owned(), gid.clone());
        gid
    }

    fn project_name(&self, gid: &str) -> Option<&str> {
        self.projects
            .iter()
            .find(|(g, _)| g == gid)
            .map(|(_, n)| n.as_str())
    }

    fn section(&self, gid: &str) -> Option<&(String, String, String)> {
        self.sections.iter().find(|(g, _, _)| g == gid)
    }

    fn task_mut(&mut self, gid: &str) -> Option<&mut FakeTask> {
        self.tasks.iter_mut().find(|t| t.gid == gid)
    }
}

struct Shared {
    base: String,
    state: Mutex<StateData>,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, StateData> {
        // Nothing panics while holding the lock; a poisoned one still holds whole data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running fake; it stops when dropped.
pub struct FakeAsana {
    server: FakeServer,
    shared: Arc<Shared>,
}

fn fixture_time(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_else(|e| panic!("fixture time {text}: {e}"))
}

fn text_time(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl FakeAsana {
    /// The fixtures' story: the project, its two sections and the three tasks of
    /// `project_tasks.json` (the first with `task.json`'s assignee, tags and creation).
    pub fn start() -> Self {
        let fake = Self::start_empty();
        {
            let mut state = fake.shared.state();
            state
                .projects
                .push((PROJECT.to_owned(), PROJECT_NAME.to_owned()));
            state.sections.push((
                SECTION_READY.to_owned(),
                "Ready for executor".to_owned(),
                PROJECT.to_owned(),
            ));
            state.sections.push((
                SECTION_IN_PROGRESS.to_owned(),
                "In progress".to_owned(),
                PROJECT.to_owned(),
            ));
            let full = fixture_json("task.json")["data"].take();
            let listed = match fixture_json("project_tasks.json")["data"].take() {
                Value::Array(items) => items,
                _ => Vec::new(),
            };
            for item in listed {
                let gid = item["gid"].as_str().unwrap_or_default().to_owned();
                let is_full = gid == TASK;
                let source = if is_full { &full } else { &item };
                let text = |key: &str| source[key].as_str().unwrap_or_default().to_owned();
                let assignee = source["assignee"]["gid"].as_str().map(|g| {
                    let name = source["assignee"]["name"].as_str().unwrap_or_default();
                    (g.to_owned(), name.to_owned())
                });
                let tags: Vec<(String, String)> = source["tags"]
                    .as_array()
                    .map(|tags| {
                        tags.iter()
                            .filter_map(|t| {
                                Some((
                                    t["gid"].as_str()?.to_owned(),
                                    t["name"].as_str()?.to_owned(),
                                ))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                for (tag_gid, tag_name) in &tags {
                    state.tag_gids.insert(tag_name.clone(), tag_gid.clone());
                }
                let section = item["memberships"][0]["section"]["gid"]
                    .as_str()
                    .unwrap_or(SECTION_READY)
                    .to_owned();
                let modified_at = fixture_time(&text("modified_at"));
                let created_at = source["created_at"]
                    .as_str()
                    .map(fixture_time)
                    .unwrap_or(modified_at);
                state.tasks.push(FakeTask {
                    gid,
                    name: text("name"),
                    notes: text("notes"),
                    completed: source["completed"].as_bool().unwrap_or(false),
                    completed_at: None,
                    assignee,
                    memberships: vec![(PROJECT.to_owned(), section)],
                    tags,
                    custom_fields: item["custom_fields"].clone(),
                    created_at,
                    modified_at,
                });
            }
        }
        fake
    }

    /// The workspace and `me`, nothing else.
    pub fn start_empty() -> Self {
        // After every time in the fixtures' story.
        let start = Utc
            .with_ymd_and_hms(2026, 3, 16, 12, 0, 0)
            .single()
            .expect("start time");
        let state = StateData::new(start);
        let (server, shared) =
            FakeServer::start_with("Asana", Router::new().fallback(handle), |base| {
                Arc::new(Shared {
                    base: base.to_owned(),
                    state: Mutex::new(state),
                })
            });
        Self { server, shared }
    }

    /// `http://127.0.0.1:PORT/api/1.0`: the API base.
    pub fn url(&self) -> url::Url {
        url::Url::parse(&format!("{}{API_PATH}", self.server.url())).expect("fake Asana URL")
    }

    /// Settings for a client of this fake, with [`TOKEN`].
    pub fn settings(&self) -> AsanaSettings {
        AsanaSettings {
            api_base: self.url(),
            token: Secret::new(TOKEN),
        }
    }

    // ----- state a test sets -----

    pub fn add_project(&self, name: &str) -> String {
        let mut state = self.shared.state();
        let gid = state.new_gid();
        state.projects.push((gid.clone(), name.to_owned()));
        gid
    }

    pub fn add_section(&self, project: &str, name: &str) -> String {
        let mut state = self.shared.state();
        let gid = state.new_gid();
        state
            .sections
            .push((gid.clone(), name.to_owned(), project.to_owned()));
        gid
    }

    /// A new task at the end of `section` (and of its project).
    pub fn add_task(&self, section: &str, seed: TaskSeed) -> String {
        let mut state = self.shared.state();
        add_task(&mut state, section, seed)
    }

    /// A project with one section per entry of `sizes`, each holding that many generated
    /// tasks; `make(i)` (i counting over all sections) says what task `i` looks like.
    pub fn seed_sections(
        &self,
        project_name: &str,
        sizes: &[usize],
        mut make: impl FnMut(usize) -> TaskSeed,
    ) -> Backlog {
        let project = self.add_project(project_name);
        let mut state = self.shared.state();
        let mut sections = Vec::new();
        let mut tasks = Vec::new();
        for (s, size) in sizes.iter().enumerate() {
            let gid = state.new_gid();
            state
                .sections
                .push((gid.clone(), format!("Section {}", s + 1), project.clone()));
            for _ in 0..*size {
                let i = tasks.len();
                tasks.push(add_task(&mut state, &gid, make(i)));
            }
            sections.push(gid);
        }
        Backlog {
            project,
            sections,
            tasks,
        }
    }

    /// Adds the task to a section of another project too (Asana's multi-homing); a change.
    pub fn add_to_section(&self, task: &str, section: &str) {
        let mut state = self.shared.state();
        let Some((_, _, project)) = state.section(section).cloned() else {
            return;
        };
        let now = state.tick();
        if let Some(task) = state.task_mut(task) {
            task.memberships.retain(|(p, _)| *p != project);
            task.memberships.push((project, section.to_owned()));
            task.modified_at = now;
        }
    }

    /// An edit by someone in Asana: the name changes, `modified_at` moves.
    pub fn rename(&self, task: &str, name: &str) {
        self.edit(task, |t, _| t.name = name.to_owned());
    }

    /// The notes edited in Asana: `modified_at` moves.
    pub fn set_notes(&self, task: &str, notes: &str) {
        self.edit(task, |t, _| t.notes = notes.to_owned());
    }

    /// Completed in Asana: `completed_at` and `modified_at` move.
    pub fn complete(&self, task: &str) {
        self.edit(task, |t, now| {
            t.completed = true;
            t.completed_at = Some(now);
        });
    }

    fn edit(&self, task: &str, change: impl FnOnce(&mut FakeTask, DateTime<Utc>)) {
        let mut state = self.shared.state();
        let now = state.tick();
        if let Some(task) = state.task_mut(task) {
            change(task, now);
            task.modified_at = now;
        }
    }

    /// Every next page answers with the offset it was asked with (a server that never
    /// stops).
    pub fn set_endless_pages(&self, endless: bool) {
        self.shared.state().endless_pages = endless;
    }

    /// Every offset issued so far expires when each of the next `n` requests that send one
    /// comes (as Asana's do "after some time, as data may have changed"): they get the 400.
    pub fn expire_offsets_at_the_next_pages(&self, n: usize) {
        self.shared.state().expire_offsets = n;
    }

    /// Serves `fault` for the next `count` API requests.
    pub fn fail_next(&self, count: usize, fault: Fault) {
        self.fail_next_matching("", count, fault);
    }

    /// Serves `fault` for the next `count` API requests whose path contains `path_part`.
    pub fn fail_next_matching(&self, path_part: &str, count: usize, fault: Fault) {
        let mut state = self.shared.state();
        for _ in 0..count {
            state.faults.push_back(FaultRule {
                fault: fault.clone(),
                path_contains: (!path_part.is_empty()).then(|| path_part.to_owned()),
            });
        }
    }

    // ----- state a test reads -----

    /// The fake's clock: the time of the latest change.
    pub fn now(&self) -> DateTime<Utc> {
        self.shared.state().now
    }

    /// A task's full record, as `GET /tasks/{gid}` without `opt_fields` answers it.
    pub fn task(&self, gid: &str) -> Option<Value> {
        let state = self.shared.state();
        let task = state.tasks.iter().find(|t| t.gid == gid)?;
        Some(full_record(&state, task))
    }

    /// The stories posted on a task, oldest first.
    pub fn stories(&self, task: &str) -> Vec<Value> {
        self.shared
            .state()
            .stories
            .get(task)
            .cloned()
            .unwrap_or_default()
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.state().requests.clone()
    }
}

fn add_task(state: &mut StateData, section: &str, seed: TaskSeed) -> String {
    let project = state
        .section(section)
        .map(|(_, _, p)| p.clone())
        .unwrap_or_default();
    let gid = state.new_gid();
    let tags = seed
        .tags
        .iter()
        .map(|name| (state.tag_gid(name), name.clone()))
        .collect();
    let now = state.tick();
    state.tasks.push(FakeTask {
        gid: gid.clone(),
        name: seed.name,
        notes: seed.notes,
        completed: seed.completed,
        completed_at: seed.completed.then_some(now),
        assignee: seed.assignee,
        memberships: vec![(project, section.to_owned())],
        tags,
        custom_fields: json!([]),
        created_at: now,
        modified_at: now,
    });
    gid
}

// ----- records -----

/// A task as `GET /tasks/{gid}` answers it without `opt_fields` (the shape of `task.json`).
fn full_record(state: &StateData, task: &FakeTask) -> Value {
    let compact = |gid: &str, name: &str, kind: &str| json!({ "gid": gid, "name": name, "resource_type": kind });
    let memberships: Vec<Value> = task
        .memberships
        .iter()
        .map(|(project, section)| {
            let section_name = state.section(section).map_or("", |(_, n, _)| n.as_str());
            json!({
                "project": compact(project, state.project_name(project).unwrap_or(""), "project"),
                "section": compact(section, section_name, "section"),
            })
        })
        .collect();
    let projects: Vec<Value> = task
        .memberships
        .iter()
        .map(|(project, _)| {
            compact(
                project,
                state.project_name(project).unwrap_or(""),
                "project",
            )
        })
        .collect();
    let first_project = task
        .memberships
        .first()
        .map_or(PROJECT, |(p, _)| p.as_str());
    json!({
        "gid": task.gid,
        "actual_time_minutes": null,
        "assignee": task.assignee.as_ref().map(|(gid, name)| compact(gid, name, "user")),
        "assignee_status": "upcoming",
        "completed": task.completed,
        "completed_at": task.completed_at.map(text_time),
        "created_at": text_time(task.created_at),
        "custom_fields": task.custom_fields,
        "due_at": null,
        "due_on": null,
        "followers": [],
        "hearted": false,
        "hearts": [],
        "liked": false,
        "likes": [],
        "memberships": memberships,
        "modified_at": text_time(task.modified_at),
        "name": task.name,
        "notes": task.notes,
        "num_hearts": 0,
        "num_likes": 0,
        "parent": null,
        "permalink_url": format!(
            "https://app.asana.com/1/{WORKSPACE}/project/{first_project}/task/{}",
            task.gid
        ),
        "projects": projects,
        "resource_type": "task",
        "start_at": null,
        "start_on": null,
        "tags": task.tags.iter().map(|(gid, name)| compact(gid, name, "tag")).collect::<Vec<_>>(),
        "resource_subtype": "default_task",
        "workspace": compact(WORKSPACE, &state.workspace_name, "workspace"),
    })
}

/// What a list answers per task without `opt_fields`: the compact record.
fn compact_record(task: &FakeTask) -> Value {
    json!({
        "gid": task.gid,
        "name": task.name,
        "resource_type": "task",
        "resource_subtype": "default_task",
    })
}

/// Whether `path` (`assignee.name`) names a field of a task record. Checked against a full
/// record with every nested object present.
fn known_path(path: &str) -> bool {
    static SAMPLE: OnceLock<Value> = OnceLock::new();
    let sample = SAMPLE.get_or_init(|| {
        let state = StateData::new(Utc::now());
        let task = FakeTask {
            gid: "1".into(),
            name: String::new(),
            notes: String::new(),
            completed: false,
            completed_at: None,
            assignee: Some(("2".into(), String::new())),
            memberships: vec![(PROJECT.into(), SECTION_READY.into())],
            tags: vec![("3".into(), String::new())],
            custom_fields: fixture_json("task.json")["data"]["custom_fields"].take(),
            created_at: state.now,
            modified_at: state.now,
        };
        full_record(&state, &task)
    });
    let mut value = sample;
    for segment in path.split('.') {
        if let Value::Array(items) = value {
            match items.first() {
                Some(first) => value = first,
                None => return false,
            }
        }
        match value.get(segment) {
            Some(next) => value = next,
            None => return false,
        }
    }
    true
}

/// `record` trimmed to `gid` plus `paths` (each split on `.`), as `opt_fields` trims.
fn project(record: &Value, paths: &[Vec<&str>]) -> Value {
    match record {
        Value::Array(items) => Value::Array(items.iter().map(|i| project(i, paths)).collect()),
        Value::Object(fields) => {
            let mut out = Map::new();
            if let Some(gid) = fields.get("gid") {
                out.insert("gid".into(), gid.clone());
            }
            let mut heads: Vec<&str> = paths.iter().filter_map(|p| p.first().copied()).collect();
            heads.sort_unstable();
            heads.dedup();
            for head in heads {
                let Some(value) = fields.get(head) else {
                    continue;
                };
                let rests: Vec<Vec<&str>> = paths
                    .iter()
                    .filter(|p| p.first() == Some(&head) && p.len() > 1)
                    .map(|p| p[1..].to_vec())
                    .collect();
                let projected = if !rests.is_empty() {
                    project(value, &rests)
                } else if head == "custom_fields" {
                    // Bare `custom_fields` answers each field's default representation.
                    value.clone()
                } else {
                    // A bare object path answers its gid only.
                    project(value, &[])
                };
                out.insert(head.to_owned(), projected);
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

// ----- serving -----

/// An answer before it becomes an HTTP response.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn json(status: u16, value: &Value) -> Self {
        Self {
            status,
            headers: vec![(
                "content-type".into(),
                "application/json; charset=UTF-8".into(),
            )],
            body: value.to_string().into_bytes(),
        }
    }

    fn data(status: u16, data: Value) -> Self {
        Self::json(status, &json!({ "data": data }))
    }

    fn error(status: u16, message: &str) -> Self {
        let mut entry = json!({ "message": message, "help": HELP });
        if status >= 500 {
            entry["phrase"] = json!("6 sad squid snuggle softly");
        }
        Self::json(status, &json!({ "errors": [entry] }))
    }

    fn bad_request(message: &str) -> Self {
        Self::error(400, message)
    }

    fn not_found(message: &str) -> Self {
        Self::error(404, message)
    }

    fn into_response(self) -> Response {
        let mut response = Response::new(Body::from(self.body));
        *response.status_mut() =
            StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        for (name, value) in self.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(&value),
            ) {
                response.headers_mut().append(name, value);
            }
        }
        response
    }
}

fn fault_reply(fault: &Fault) -> Reply {
    match fault {
        Fault::RateLimited { retry_after } => {
            let mut reply = Reply::error(
                429,
                "You have made too many requests recently. Please, be chill.",
            );
            if let Some(seconds) = retry_after {
                reply
                    .headers
                    .push(("retry-after".into(), seconds.to_string()));
            }
            reply
        }
        Fault::Status(status) => Reply::error(*status, "Server Error"),
        Fault::NotJson => Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/html".into())],
            body: b"<html><body>Asana is down for maintenance</body></html>".to_vec(),
        },
        Fault::Delay(_) => Reply::error(500, "Server Error"),
    }
}

/// Request bodies here are small; this only bounds a runaway client.
const BODY_LIMIT: usize = 1024 * 1024;

async fn handle(State(shared): State<Arc<Shared>>, request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, BODY_LIMIT)
        .await
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let query = parts.uri.query().unwrap_or("").to_owned();
    let authorization = parts
        .headers
        .get(header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter(|(name, _)| *name != header::AUTHORIZATION)
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    let authorized = authorization.as_deref() == Some(format!("Bearer {TOKEN}").as_str());

    let fault = if authorized {
        let mut state = shared.state();
        let at = state.faults.iter().position(|rule| {
            rule.path_contains
                .as_deref()
                .is_none_or(|part| path.contains(part))
        });
        at.and_then(|i| state.faults.remove(i))
            .map(|rule| rule.fault)
    } else {
        None
    };
    let fault = match fault {
        Some(Fault::Delay(delay)) => {
            tokio::time::sleep(delay).await;
            None
        }
        other => other,
    };

    let mut state = shared.state();
    let reply = if !authorized {
        Reply::json(401, &fixture_json("error_401.json"))
    } else if let Some(fault) = &fault {
        fault_reply(fault)
    } else {
        match path.strip_prefix(API_PATH) {
            Some(rest) => {
                let segments: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
                let pairs: Vec<(String, String)> = url::form_urlencoded::parse(query.as_bytes())
                    .into_owned()
                    .collect();
                route(
                    &mut state,
                    &shared.base,
                    &parts.method,
                    &segments,
                    &pairs,
                    &body,
                )
            }
            None => Reply::not_found("No matching route for request"),
        }
    };
    state.requests.push(Recorded {
        method: parts.method.to_string(),
        path,
        query,
        headers,
        authorization,
        body: String::from_utf8_lossy(&body).into_owned(),
        status: reply.status,
    });
    drop(state);
    reply.into_response()
}

/// Which tasks a list call is over.
enum Scope {
    Project(String),
    Section(String),
    Assignee { user: String },
}

const LIST_PARAMS: [&str; 5] = [
    "opt_fields",
    "opt_pretty",
    "limit",
    "offset",
    "completed_since",
];
const TASKS_PARAMS: [&str; 5] = [
    "assignee",
    "workspace",
    "project",
    "section",
    "modified_since",
];

fn route(
    state: &mut StateData,
    base: &str,
    method: &Method,
    segments: &[&str],
    pairs: &[(String, String)],
    body: &[u8],
) -> Reply {
    let get = method == Method::GET;
    let post = method == Method::POST;
    let param = |name: &str| {
        pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    match segments {
        ["projects", gid, "tasks"] if get => {
            if state.project_name(gid).is_none() {
                return Reply::not_found(&format!("project: Unknown object: {gid}"));
            }
            list_tasks(
                state,
                base,
                segments,
                pairs,
                &LIST_PARAMS,
                Scope::Project((*gid).into()),
            )
        }
        ["sections", gid, "tasks"] if get => {
            if state.section(gid).is_none() {
                return Reply::not_found(&format!("section: Unknown object: {gid}"));
            }
            list_tasks(
                state,
                base,
                segments,
                pairs,
                &LIST_PARAMS,
                Scope::Section((*gid).into()),
            )
        }
        ["tasks"] if get => {
            let allowed: Vec<&str> = LIST_PARAMS.iter().chain(&TASKS_PARAMS).copied().collect();
            let scope = match (
                param("assignee"),
                param("workspace"),
                param("project"),
                param("section"),
            ) {
                (Some(_), None, _, _) => {
                    return Reply::bad_request(
                        "workspace: Missing input: You must specify a workspace when filtering by assignee.",
                    )
                }
                (None, Some(_), _, _) => {
                    return Reply::bad_request(
                        "assignee: Missing input: You must specify an assignee when filtering by workspace.",
                    )
                }
                (Some(assignee), Some(workspace), None, None) => {
                    if workspace != WORKSPACE {
                        return Reply::not_found(&format!("workspace: Unknown object: {workspace}"));
                    }
                    let user = if assignee == "me" {
                        state.me.0.clone()
                    } else {
                        assignee.to_owned()
                    };
                    Scope::Assignee { user }
                }
                (None, None, Some(project), None) => {
                    if state.project_name(project).is_none() {
                        return Reply::not_found(&format!("project: Unknown object: {project}"));
                    }
                    Scope::Project(project.to_owned())
                }
                (None, None, None, Some(section)) => {
                    if state.section(section).is_none() {
                        return Reply::not_found(&format!("section: Unknown object: {section}"));
                    }
                    Scope::Section(section.to_owned())
                }
                _ => {
                    return Reply::bad_request(
                        "Must specify exactly one of project, tag, section, user task list, or assignee + workspace",
                    )
                }
            };
            list_tasks(state, base, segments, pairs, &allowed, scope)
        }
        ["tasks", gid] if get => match state.tasks.iter().find(|t| t.gid == *gid) {
            Some(task) => {
                let record = full_record(state, task);
                match opt_fields(param("opt_fields")) {
                    Ok(Some(paths)) => Reply::data(200, project(&record, &paths)),
                    Ok(None) => Reply::data(200, record),
                    Err(reply) => reply,
                }
            }
            None => Reply::not_found(&format!("task: Unknown object: {gid}")),
        },
        ["tasks", gid, "stories"] if post => post_story(state, gid, body),
        ["tasks", gid, "stories"] if get => match state.stories.get(*gid) {
            Some(stories) => Reply::data(200, Value::Array(stories.clone())),
            None if state.tasks.iter().any(|t| t.gid == *gid) => Reply::data(200, json!([])),
            None => Reply::not_found(&format!("task: Unknown object: {gid}")),
        },
        _ => Reply::not_found("No matching route for request"),
    }
}

/// `opt_fields` split into paths; a 400 naming an unknown path.
fn opt_fields(value: Option<&str>) -> Result<Option<Vec<Vec<&str>>>, Reply> {
    let Some(value) = value else {
        return Ok(None);
    };
    let mut paths = Vec::new();
    for path in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if !known_path(path) {
            return Err(Reply::bad_request(&format!(
                "opt_fields: Unknown field: {path}"
            )));
        }
        paths.push(path.split('.').collect());
    }
    Ok(Some(paths))
}

fn parse_time(name: &str, value: &str) -> Result<DateTime<Utc>, Reply> {
    DateTime::parse_from_rfc3339(value)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| Reply::bad_request(&format!("{name}: Invalid date-time: {value}")))
}

fn list_tasks(
    state: &mut StateData,
    base: &str,
    segments: &[&str],
    pairs: &[(String, String)],
    allowed: &[&str],
    scope: Scope,
) -> Reply {
    if let Some((name, _)) = pairs.iter().find(|(n, _)| !allowed.contains(&n.as_str())) {
        return Reply::bad_request(&format!(
            "{name}: Not a recognized parameter for /{}",
            segments.join("/")
        ));
    }
    let param = |name: &str| {
        pairs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let paths = match opt_fields(param("opt_fields")) {
        Ok(paths) => paths,
        Err(reply) => return reply,
    };
    let limit = match param("limit").map(str::parse::<usize>) {
        None => None,
        Some(Ok(limit)) if (1..=100).contains(&limit) => Some(limit),
        Some(_) => return Reply::bad_request("limit: The value must be between 1 and 100"),
    };
    let modified_since = match param("modified_since").map(|v| parse_time("modified_since", v)) {
        None => None,
        Some(Ok(time)) => Some(time),
        Some(Err(reply)) => return reply,
    };
    let completed_since = match param("completed_since") {
        None => None,
        Some("now") => Some(state.now),
        Some(value) => match parse_time("completed_since", value) {
            Ok(time) => Some(time),
            Err(reply) => return reply,
        },
    };
    // The offset belongs to this query: everything but the offset itself.
    let mut key_pairs: Vec<String> = pairs
        .iter()
        .filter(|(n, _)| n != "offset")
        .map(|(n, v)| format!("{n}={v}"))
        .collect();
    key_pairs.sort();
    let query_key = format!("/{}?{}", segments.join("/"), key_pairs.join("&"));
    if param("offset").is_some() && state.expire_offsets > 0 {
        state.expire_offsets -= 1;
        state.offsets.clear();
    }
    let start = match param("offset") {
        None => 0,
        Some(token) => match state.offsets.get(token) {
            Some(offset) if offset.query_key == query_key => offset.position,
            _ => {
                return Reply::bad_request(
                    "offset: Your pagination token is invalid or has expired.",
                )
            }
        },
    };

    let matching: Vec<&FakeTask> = state
        .tasks
        .iter()
        .filter(|t| match &scope {
            Scope::Project(p) => t.memberships.iter().any(|(project, _)| project == p),
            Scope::Section(s) => t.memberships.iter().any(|(_, section)| section == s),
            Scope::Assignee { user } => t.assignee.as_ref().is_some_and(|(gid, _)| gid == user),
        })
        .filter(|t| modified_since.is_none_or(|since| t.modified_at >= since))
        .filter(|t| {
            completed_since
                .is_none_or(|since| !t.completed || t.completed_at.is_some_and(|at| at >= since))
        })
        .collect();
    let total = matching.len();
    let end = limit.map_or(total, |limit| (start + limit).min(total));
    let data: Vec<Value> = matching
        .get(start.min(total)..end)
        .unwrap_or_default()
        .iter()
        .map(|task| match &paths {
            Some(paths) => project(&full_record(state, task), paths),
            None => compact_record(task),
        })
        .collect();

    let Some(limit) = limit else {
        // Not paginated: no `next_page` at all.
        return Reply::json(200, &json!({ "data": data }));
    };
    let next_position = if state.endless_pages {
        Some(start)
    } else {
        (end < total).then_some(end)
    };
    let next_page = match next_position {
        Some(position) => {
            let token = match (state.endless_pages, param("offset")) {
                (true, Some(token)) => token.to_owned(),
                _ => issue_offset(state, &query_key, position),
            };
            let path = format!("/{}?limit={limit}&offset={token}", segments.join("/"));
            json!({
                "offset": token,
                "path": path,
                "uri": format!("{base}{API_PATH}{path}"),
            })
        }
        None => Value::Null,
    };
    Reply::json(200, &json!({ "data": data, "next_page": next_page }))
}

/// A new opaque offset, shaped like Asana's (a JWT-like token).
fn issue_offset(state: &mut StateData, query_key: &str, position: usize) -> String {
    state.offsets_issued += 1;
    let digest = Sha256::digest(format!("{}|{query_key}|{position}", state.offsets_issued));
    let hex: String = digest.iter().take(24).map(|b| format!("{b:02x}")).collect();
    let token = format!("eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.{hex}");
    state.offsets.insert(
        token.clone(),
        Offset {
            query_key: query_key.to_owned(),
            position,
        },
    );
    token
}

/// `POST /tasks/{gid}/stories` with `{"data": {"text": …}}`: a comment by `me`, shaped like
/// `story_create_201.json`. Adding a story modifies the task.
fn post_story(state: &mut StateData, gid: &str, body: &[u8]) -> Reply {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return Reply::bad_request("Could not parse request data, invalid JSON");
    };
    let Some(text) = request["data"]["text"].as_str().filter(|t| !t.is_empty()) else {
        return Reply::bad_request("text: Missing input");
    };
    let text = text.to_owned();
    if !state.tasks.iter().any(|t| t.gid == gid) {
        return Reply::not_found(&format!("task: Unknown object: {gid}"));
    }
    let now = state.tick();
    let story_gid = state.new_gid();
    let me = state.me.clone();
    let Some(task) = state.task_mut(gid) else {
        return Reply::not_found(&format!("task: Unknown object: {gid}"));
    };
    task.modified_at = now;
    let task_name = task.name.clone();
    let mut story = fixture_json("story_create_201.json")["data"].take();
    story["gid"] = json!(story_gid);
    story["created_at"] = json!(text_time(now));
    story["created_by"] = json!({ "gid": me.0, "name": me.1, "resource_type": "user" });
    story["text"] = json!(text);
    story["target"]["gid"] = json!(gid);
    story["target"]["name"] = json!(task_name);
    state
        .stories
        .entry(gid.to_owned())
        .or_default()
        .push(story.clone());
    Reply::data(201, story)
}
