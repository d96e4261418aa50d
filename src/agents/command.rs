//! Any program as a worker: the configured argv as it is, the prompt on stdin, and every
//! non-blank stdout line read as the worker speaking, so its protocol lines
//! (`[DONE:…]`, `[REQUEST:…]`, …) reach the runner; but a line that only reports
//! reconnecting (an agent's `Reconnecting... waiting for network` passed through) is
//! waiting, not speaking, and no sign of life. It has no sessions: a resumed run starts
//! the program again with the resume prompt.

use super::event::AgentEvent;

/// The worker's command line: `command` unchanged (executor adds nothing to it).
pub fn argv(command: &[String]) -> Vec<String> {
    command.to_vec()
}

/// One stdout line: [`AgentEvent::AssistantText`] unless it is blank, or
/// [`AgentEvent::Retrying`] when it only reports reconnecting
/// ([`super::event::reports_retrying`]). A trailing `\r` is dropped; nothing else is
/// changed.
pub fn parse_line(line: &str) -> Vec<AgentEvent> {
    let text = line.trim_end_matches(['\r', '\n']);
    if text.trim().is_empty() {
        return Vec::new();
    }
    if super::event::reports_retrying(text) {
        return vec![AgentEvent::Retrying {
            message: text.to_string(),
        }];
    }
    vec![AgentEvent::AssistantText {
        text: text.to_string(),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_non_blank_line_is_the_worker_speaking() {
        let output = "editing notes.md\n\n   \n[STATUS:investigation] looking\r\n[DONE:pr_ready] summary=\"edited\"\n";
        let events: Vec<AgentEvent> = output.lines().flat_map(parse_line).collect();
        assert_eq!(
            events,
            vec![
                AgentEvent::AssistantText {
                    text: "editing notes.md".into()
                },
                AgentEvent::AssistantText {
                    text: "[STATUS:investigation] looking".into()
                },
                AgentEvent::AssistantText {
                    text: "[DONE:pr_ready] summary=\"edited\"".into()
                },
            ]
        );
        assert!(events.iter().all(AgentEvent::is_meaningful));
        assert_eq!(
            events[2].protocol_lines(),
            vec!["[DONE:pr_ready] summary=\"edited\""]
        );
    }

    #[test]
    fn a_line_that_only_reports_reconnecting_is_no_sign_of_life() {
        // What Codex prints when it has no route, passed through by a wrapping script.
        for line in [
            "Reconnecting... 2/5 (stream disconnected before completion: URL error: Proxy connection failed: HTTP CONNECT failed with status 403)",
            "Reconnecting... waiting for network (Connection failed: error sending request)",
        ] {
            let events = parse_line(line);
            assert_eq!(
                events,
                vec![AgentEvent::Retrying {
                    message: line.into()
                }]
            );
            assert!(!events[0].is_meaningful());
        }
        assert!(parse_line("[STATUS:net] reconnecting to the database")[0].is_meaningful());
    }

    #[test]
    fn json_lines_are_text_too() {
        assert_eq!(
            parse_line(r#"{"type":"result"}"#),
            vec![AgentEvent::AssistantText {
                text: r#"{"type":"result"}"#.into()
            }]
        );
    }

    #[test]
    fn the_argv_is_passed_through_unchanged() {
        let command = vec!["/opt/worker.sh".to_string(), "--fast".to_string()];
        assert_eq!(argv(&command), command);
    }
}
