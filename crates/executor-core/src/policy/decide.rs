//! Rule matching: the first rule whose action and conditions hold decides; otherwise the
//! contract's default. Pure and allocation-light (it runs for every tool call of every
//! worker): globs and regexes were compiled when the contract was loaded.
//!
//! Two safety nets live here rather than in contracts, because no contract may lift them:
//! an [`UNCLASSIFIABLE`] action is never approved, and an empty list of actions escalates.

use super::contract::{Condition, Contract, Rule, Test};
use super::{paths, Action, Decision, Scope, Verdict, UNCLASSIFIABLE};

impl Contract {
    /// Decides one action.
    pub fn decide(&self, action: &Action, scope: &Scope) -> Verdict {
        let verdict = match self.rules.iter().find(|r| rule_matches(r, action, scope)) {
            Some(rule) => Verdict {
                decision: rule.decision,
                rule_id: Some(rule.id.clone()),
                why: rule.why.clone(),
                notify: rule.notify,
            },
            None => Verdict {
                decision: self.default,
                rule_id: None,
                why: format!(
                    "no rule of the {} contract matches {}: its default",
                    self.role, action.kind
                ),
                notify: false,
            },
        };
        if verdict.decision == Decision::Approve && action.kind == UNCLASSIFIABLE {
            return Verdict {
                decision: Decision::Escalate,
                rule_id: verdict.rule_id,
                why: format!(
                    "cannot be judged ({}); an unclassifiable request is never approved",
                    action.arg("reason").unwrap_or("no reason given")
                ),
                notify: verdict.notify,
            };
        }
        verdict
    }

    /// Decides a list of actions (the parts of a compound command, the files of a patch):
    /// the most severe verdict wins (deny > escalate > approve; the first among equals), and
    /// an empty list — nothing could be classified — escalates.
    pub fn decide_all(&self, actions: &[Action], scope: &Scope) -> Verdict {
        let mut worst: Option<Verdict> = None;
        for action in actions {
            let v = self.decide(action, scope);
            let worse = worst.as_ref().is_none_or(|w| v.decision > w.decision);
            if worse {
                let deny = v.decision == Decision::Deny;
                worst = Some(v);
                if deny {
                    break; // nothing is more severe
                }
            }
        }
        worst.unwrap_or_else(|| Verdict {
            decision: Decision::Escalate,
            rule_id: None,
            why: "nothing in the request could be classified".into(),
            notify: false,
        })
    }
}

fn rule_matches(rule: &Rule, action: &Action, scope: &Scope) -> bool {
    if let Some(kind) = &rule.action {
        if *kind != action.kind {
            return false;
        }
    }
    rule.conditions
        .iter()
        .all(|c| condition_holds(c, action, scope))
}

fn condition_holds(c: &Condition, action: &Action, scope: &Scope) -> bool {
    match c.test {
        Test::Confined(want) => return scope.confined == want,
        Test::ProcessCap(want) => return scope.process_cap == want,
        Test::Network(ref name) => {
            return scope.network.as_ref().is_some_and(|n| match name.as_ref() {
                Test::Exact(want) => want == n.as_str(),
                Test::Glob(glob) => glob.is_match(n.as_str()),
                _ => false,
            })
        }
        _ => {}
    }
    let value = action.args.get(&c.arg).map(String::as_str);
    match (&c.test, value) {
        (Test::Confined(_) | Test::ProcessCap(_) | Test::Network(_), _) => false, // decided above
        (Test::Absent, v) => v.is_none(),
        (_, None) => false,
        (Test::Exact(want), Some(v)) => want == v,
        (Test::Glob(glob), Some(v)) => glob.is_match(v),
        (Test::Regex(re), Some(v)) => re.is_match(v),
        (Test::RunBranch, Some(v)) => scope.run_branch.as_deref() == Some(v),
        (Test::InsideWorktree, Some(v)) => paths::is_inside(&scope.worktree, v) == Some(true),
        (Test::OutsideWorktree, Some(v)) => paths::is_inside(&scope.worktree, v) == Some(false),
        (Test::WithinReach, Some(v)) => scope.network.as_ref().is_some_and(|n| n.reaches(v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn contract(rules: &str) -> Contract {
        let text = format!(
            r#"{{"contract_version": 1, "role": "worker", "default": "escalate", "rules": [{rules}]}}"#
        );
        Contract::parse("test.json", &text).unwrap_or_else(|e| panic!("{e}"))
    }

    fn scope() -> Scope {
        Scope::new("/w/run", Some("executor/run-1"))
    }

    #[test]
    fn first_matching_rule_wins_then_the_default() {
        let c = contract(
            r#"{"id": "own", "action": "push_branch", "when": {"branch": "$run_branch"}, "decision": "approve", "why": "own"},
               {"id": "other", "action": "push_branch", "decision": "deny", "why": "other"}"#,
        );
        let own = Action::new("push_branch").with("branch", "executor/run-1");
        let main = Action::new("push_branch").with("branch", "main");
        assert_eq!(c.decide(&own, &scope()).rule_id.as_deref(), Some("own"));
        assert_eq!(c.decide(&main, &scope()).decision, Decision::Deny);
        let v = c.decide(&Action::new("launch_rocket"), &scope());
        assert_eq!((v.decision, v.rule_id), (Decision::Escalate, None));
    }

    #[test]
    fn run_branch_never_matches_a_run_without_a_branch() {
        let c = contract(
            r#"{"id": "own", "action": "push_branch", "when": {"branch": "$run_branch"}, "decision": "approve", "why": "own"}"#,
        );
        let a = Action::new("push_branch").with("branch", "executor/run-1");
        assert_eq!(
            c.decide(&a, &Scope::new("/w/run", None)).decision,
            Decision::Escalate
        );
    }

    #[test]
    fn conditions_glob_regex_exact_absent_and_wildcard_action() {
        let c = contract(
            r#"{"id": "sudo", "action": "*", "when": {"arg:sudo": true}, "decision": "deny", "why": "x"},
               {"id": "nobranch", "action": "push_branch", "when": {"branch": null}, "decision": "escalate", "why": "x"},
               {"id": "glob", "action": "push_branch", "when": {"branch": "executor/*"}, "decision": "approve", "why": "x"},
               {"id": "re", "action": "run_command", "when": {"command": "^rm\\s+-rf"}, "decision": "deny", "why": "x"},
               {"id": "inside", "action": "modify_files", "when": {"path": "inside_worktree"}, "decision": "approve", "why": "x"},
               {"id": "outside", "action": "modify_files", "when": {"path": "outside_worktree"}, "decision": "deny", "why": "x"}"#,
        );
        let id = |a: Action| c.decide(&a, &scope()).rule_id;
        assert_eq!(
            id(Action::new("run_tests").with("sudo", "true")).as_deref(),
            Some("sudo")
        );
        assert_eq!(id(Action::new("push_branch")).as_deref(), Some("nobranch"));
        assert_eq!(
            id(Action::new("push_branch").with("branch", "executor/a/b")).as_deref(),
            Some("glob")
        );
        assert_eq!(
            id(Action::new("push_branch").with("branch", "feature/a")),
            None
        );
        assert_eq!(
            id(Action::new("run_command").with("command", "rm -rf /")).as_deref(),
            Some("re")
        );
        assert_eq!(
            id(Action::new("modify_files").with("path", "/w/run/a")).as_deref(),
            Some("inside")
        );
        assert_eq!(
            id(Action::new("modify_files").with("path", "/w/run/../b")).as_deref(),
            Some("outside")
        );
        assert_eq!(
            id(Action::new("modify_files").with("path", "~/.bashrc")).as_deref(),
            Some("outside")
        );
        assert_eq!(
            id(Action::new("modify_files").with("path_unresolved", "$X/a")),
            None
        );
    }

    #[test]
    fn confined_tests_the_scope_not_the_action() {
        let c = contract(
            r#"{"id": "inside-wall", "action": "run_unknown", "when": {"confined": true}, "decision": "approve", "why": "x"},
               {"id": "outside-wall", "action": "run_unknown", "when": {"confined": false}, "decision": "escalate", "why": "y"}"#,
        );
        let a = Action::new("run_unknown").with("program", "frobnicate");
        let strict = c.decide(&a, &scope());
        assert_eq!(strict.rule_id.as_deref(), Some("outside-wall"));
        let walled = c.decide(&a, &scope().with_confined(true));
        assert_eq!(
            (walled.decision, walled.rule_id.as_deref()),
            (Decision::Approve, Some("inside-wall"))
        );
        // An action argument of the same name changes nothing.
        let sneaky = a.with("confined", "true");
        assert_eq!(c.decide(&sneaky, &scope()).decision, Decision::Escalate);
        assert!(!Scope::new("/w", None).confined, "the default is strict");
        assert!(scope().with_confined(true).on_disk().confined);
    }

    #[test]
    fn unclassifiable_is_never_approved_even_by_a_rule() {
        let c = contract(r#"{"id": "all", "action": "*", "decision": "approve", "why": "x"}"#);
        let v = c.decide(&Action::unclassifiable("not UTF-8"), &scope());
        assert_eq!(v.decision, Decision::Escalate);
    }

    #[test]
    fn the_most_severe_part_wins_and_nothing_escalates() {
        let c = contract(
            r#"{"id": "t", "action": "run_tests", "decision": "approve", "why": "x"},
               {"id": "m", "action": "merge_pr", "decision": "escalate", "why": "x"},
               {"id": "p", "action": "push_branch", "decision": "deny", "why": "x"}"#,
        );
        let t = Action::new("run_tests");
        let m = Action::new("merge_pr");
        let p = Action::new("push_branch");
        let s = scope();
        assert_eq!(
            c.decide_all(&[t.clone(), m.clone()], &s).rule_id.as_deref(),
            Some("m")
        );
        assert_eq!(
            c.decide_all(&[m.clone(), p, t.clone()], &s)
                .rule_id
                .as_deref(),
            Some("p")
        );
        assert_eq!(c.decide_all(&[t], &s).decision, Decision::Approve);
        assert_eq!(c.decide_all(&[], &s).decision, Decision::Escalate);
    }
}
