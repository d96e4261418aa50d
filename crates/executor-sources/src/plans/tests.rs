use super::*;

fn ok(path: &str, text: &str) -> PlanNote {
    parse_note(path, text.as_bytes()).expect("note parses")
}

fn err(path: &str, bytes: &[u8]) -> NoteError {
    parse_note(path, bytes).expect_err("note must be refused")
}

#[test]
fn front_matter_fields_become_task_fields_and_the_rest_goes_to_notes() {
    let note = ok(
        "fix-tab.md",
        "---\ntitle: Fix tab preview\npriority: 2\nsource: obsidian\ngid: T-9\narea: browser\ntags: [ui, tabs]\n---\nThe preview sticks.\n",
    );
    assert_eq!(note.gid, "T-9");
    assert_eq!(note.title, "Fix tab preview");
    assert_eq!(note.priority, Some(2));
    assert_eq!(note.source.as_deref(), Some("obsidian"));
    assert_eq!(note.description, "# Fix tab preview\n\nThe preview sticks.");
    assert_eq!(
        note.notes.as_deref(),
        Some("area: browser\ntags:\n- ui\n- tabs")
    );
}

#[test]
fn a_note_without_front_matter_gets_a_path_derived_gid_and_its_heading_as_title() {
    let note = ok(
        "sub/Speed up startup.md",
        "# Speed up startup\n\nProfile it.\n",
    );
    assert_eq!(
        note.gid,
        executor_core::gid::for_plan_note("sub/Speed up startup.md")
    );
    assert_eq!(note.title, "Speed up startup");
    assert_eq!(note.description, "# Speed up startup\n\nProfile it.");
    assert_eq!(note.notes, None);
    assert_eq!(note.priority, None);
}

#[test]
fn a_note_without_heading_is_titled_by_its_file_name() {
    let note = ok("plans/Refactor tabs.md", "Just some words.");
    assert_eq!(note.title, "Refactor tabs");
    assert_eq!(note.description, "# Refactor tabs\n\nJust some words.");
}

#[test]
fn a_heading_equal_to_the_front_matter_title_is_not_repeated() {
    let note = ok("a.md", "---\ntitle: Same\n---\n# Same\n\nBody\n");
    assert_eq!(note.description, "# Same\n\nBody");
}

#[test]
fn empty_front_matter_is_no_front_matter() {
    let note = ok("a.md", "---\n---\nBody only\n");
    assert_eq!(note.title, "a");
}

#[test]
fn numeric_gid_is_kept_as_text() {
    assert_eq!(
        ok("a.md", "---\ngid: 1209876543210987\n---\nx").gid,
        "1209876543210987"
    );
}

#[test]
fn malformed_notes_say_why() {
    assert_eq!(err("a.md", b""), NoteError::Empty);
    assert_eq!(err("a.md", b"  \n\n"), NoteError::Empty);
    assert_eq!(err("a.md", b"ok \xff\xfe"), NoteError::NotUtf8(3));
    assert_eq!(
        err("a.md", b"---\ntitle: x\nno end\n"),
        NoteError::UnclosedFrontMatter
    );
    assert!(matches!(
        err("a.md", b"---\ntitle: [unclosed\n---\nbody"),
        NoteError::BadYaml(_)
    ));
    assert_eq!(
        err("a.md", b"---\n- a\n- b\n---\nbody"),
        NoteError::NotAMapping("list")
    );
    assert_eq!(
        err("a.md", b"---\npriority: high\n---\nbody"),
        NoteError::BadField {
            key: "priority",
            expected: "a whole number"
        }
    );
    assert!(matches!(
        err("a.md", b"---\ngid: a/b\n---\nbody"),
        NoteError::BadGid(_)
    ));
    assert_eq!(
        err("a.md", b"---\ntitle: {a: 1}\n---\nbody"),
        NoteError::BadField {
            key: "title",
            expected: "text"
        }
    );
}

#[test]
fn a_byte_order_mark_does_not_hide_front_matter() {
    let note = ok("a.md", "\u{feff}---\ntitle: With BOM\n---\nx");
    assert_eq!(note.title, "With BOM");
}

#[test]
fn scan_reads_notes_recursively_and_skips_hidden_and_other_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("sub")).expect("mkdir");
    std::fs::create_dir_all(dir.path().join(".obsidian")).expect("mkdir");
    std::fs::write(dir.path().join("b.md"), "# B").expect("write");
    std::fs::write(dir.path().join("sub/a.md"), "# A").expect("write");
    std::fs::write(dir.path().join(".obsidian/x.md"), "# hidden").expect("write");
    std::fs::write(dir.path().join(".draft.md"), "# hidden").expect("write");
    std::fs::write(dir.path().join("image.png"), [0u8, 1, 2]).expect("write");
    let found = scan(dir.path()).expect("scan");
    let paths: Vec<&str> = found.iter().map(|n| n.relative_path.as_str()).collect();
    assert_eq!(paths, ["b.md", "sub/a.md"]);
    assert!(found.iter().all(|n| n.note.is_ok()));
    assert_ne!(found[0].fingerprint, found[1].fingerprint);
}

#[test]
fn scan_of_a_missing_folder_is_empty() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(scan(&dir.path().join("nope")).expect("scan").is_empty());
}

#[test]
fn a_note_with_a_non_utf8_name_is_reported_not_skipped() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let name = std::ffi::OsStr::from_bytes(b"bad-\xff-name.md");
    std::fs::write(dir.path().join(name), "# ok").expect("write");
    let found = scan(dir.path()).expect("scan");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].note, Err(NoteError::NameNotUtf8));
}

#[test]
fn an_unlistable_subfolder_is_reported_and_the_rest_still_read() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).expect("mkdir");
    std::fs::write(locked.join("inside.md"), "# hidden by permissions").expect("write");
    std::fs::write(dir.path().join("fine.md"), "# Fine").expect("write");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    if std::fs::read_dir(&locked).is_ok() {
        // Running as root: permissions do not stop reading, so there is nothing to report.
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "skipped: an_unlistable_subfolder_is_reported (root reads any folder)"
        );
        return;
    }
    let found = scan(dir.path()).expect("scan");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let paths: Vec<&str> = found.iter().map(|n| n.relative_path.as_str()).collect();
    assert_eq!(paths, ["fine.md", "locked"]);
    assert!(found[0].note.is_ok());
    assert!(matches!(found[1].note, Err(NoteError::Unreadable(_))));
}

#[test]
fn a_link_leaving_the_folder_is_reported_unread_and_one_inside_is_followed() {
    use std::os::unix::fs::symlink;
    let outside = tempfile::tempdir().expect("tempdir");
    std::fs::write(outside.path().join("secret.md"), "# SECRET=1").expect("write");
    std::fs::create_dir_all(outside.path().join("folder")).expect("mkdir");
    std::fs::write(outside.path().join("folder/x.md"), "# X").expect("write");
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("sub")).expect("mkdir");
    std::fs::write(dir.path().join("sub/real.md"), "# Real").expect("write");
    symlink("/proc/self/environ", dir.path().join("env.md")).expect("link");
    symlink(outside.path().join("secret.md"), dir.path().join("home.md")).expect("link");
    symlink(outside.path().join("folder"), dir.path().join("linked")).expect("link");
    symlink(
        outside.path().join("secret.md"),
        dir.path().join("note.txt"),
    )
    .expect("link");
    symlink("sub/real.md", dir.path().join("alias.md")).expect("link");
    symlink("sub", dir.path().join("sub-again")).expect("link");
    symlink("nowhere.md", dir.path().join("dangling.md")).expect("link");

    let found = scan(dir.path()).expect("scan");
    let seen: Vec<(&str, Result<&str, String>)> = found
        .iter()
        .map(|n| {
            (
                n.relative_path.as_str(),
                n.note
                    .as_ref()
                    .map(|note| note.title.as_str())
                    .map_err(|e| e.to_string()),
            )
        })
        .collect();
    assert_eq!(seen.len(), 6, "{seen:#?}");
    assert_eq!(seen[0], ("alias.md", Ok("Real")));
    assert_eq!(seen[5], ("sub/real.md", Ok("Real")));
    for (at, name) in [(2, "env.md"), (3, "home.md"), (4, "linked")] {
        let (path, note) = &seen[at];
        assert_eq!(*path, name, "{seen:#?}");
        let reason = note.as_ref().expect_err(name);
        assert!(
            reason.contains("outside the plans folder"),
            "{name}: {reason}"
        );
        assert!(!reason.contains("SECRET"), "{reason}");
    }
    let (path, note) = &seen[1];
    assert_eq!(*path, "dangling.md");
    assert!(note
        .as_ref()
        .is_err_and(|e| e.contains("nowhere.md, which cannot be followed")));
}

#[test]
fn status_draft_marks_a_note_a_draft_and_other_statuses_stay_in_the_notes() {
    let draft = ok(
        "a.md",
        "---\nstatus: Draft\narea: ui\n---\n# Half an idea\n",
    );
    assert!(draft.draft);
    assert_eq!(draft.notes.as_deref(), Some("area: ui"));

    let ready = ok("a.md", "---\nstatus: todo\n---\n# Ready\n");
    assert!(!ready.draft);
    assert_eq!(ready.notes.as_deref(), Some("status: todo"));

    assert!(!ok("a.md", "# No front matter\n").draft);
    assert!(
        !ok(
            "a.md",
            "---\nstatus: [draft]\n---\n# A list is not a draft\n"
        )
        .draft
    );
}
