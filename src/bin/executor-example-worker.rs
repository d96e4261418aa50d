//! The bundled example worker: what `executor` runs when no agent CLI is installed, so the
//! whole loop (worktree, worker, protocol lines, verification, commit) can be seen working
//! on any machine. It reads its prompt on stdin, writes one file in its working directory
//! (the run's worktree) and reports in the worker message format.

use std::io::Read;

fn main() -> std::process::ExitCode {
    let mut prompt = String::new();
    if let Err(error) = std::io::stdin().read_to_string(&mut prompt) {
        println!("[ESCALATE:blocked] cannot read the prompt: {error}");
        return std::process::ExitCode::from(1);
    }
    // The analyzer's prompt: the example worker judges nothing, so every task goes to the
    // owner for review, saying so.
    if prompt.starts_with("# Triage one task") || prompt.contains("\n# Triage one task") {
        println!(
            "```json\n{{\"status\": \"for_review\", \"priority\": 3, \"analysis_summary\": \"Not analyzed: the bundled example worker judges no task; configure [agent] to have a model triage it.\"}}\n```"
        );
        return std::process::ExitCode::SUCCESS;
    }
    println!(
        "[STATUS:investigation] reading the task ({} bytes of prompt)",
        prompt.len()
    );
    let first_lines: String = prompt.lines().take(12).collect::<Vec<_>>().join("\n");
    let fixing_ci = prompt.contains("fix_ci") || prompt.to_lowercase().contains("ci failed");
    let path = std::path::Path::new("EXECUTOR_EXAMPLE.md");
    let mut text = std::fs::read_to_string(path).unwrap_or_default();
    if fixing_ci {
        text.push_str("\nAnother pass after a failed verification.\n");
    } else {
        text.push_str(&format!(
            "# Example change\n\nWritten by the bundled example worker for this prompt:\n\n```\n{first_lines}\n```\n"
        ));
    }
    if let Err(error) = std::fs::write(path, text) {
        println!(
            "[ESCALATE:blocked] cannot write {}: {error}",
            path.display()
        );
        return std::process::ExitCode::from(1);
    }
    println!("[STATUS:implementing] wrote {}", path.display());
    println!(
        "[DONE:implemented] the example change is in {}",
        path.display()
    );
    std::process::ExitCode::SUCCESS
}
