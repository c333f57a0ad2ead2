//! iptables rules as argument lists for the iptables program (never a
//! shell): which table and chain, and the match and target arguments.

use std::process::{Command, Output};

use serde::Serialize;

/// One rule, as `iptables -t TABLE -A CHAIN RULE...` takes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub table: &'static str,
    pub chain: &'static str,
    /// Match and target arguments, as given to -A / -D.
    pub rule: Vec<String>,
}

impl Rule {
    pub fn new(table: &'static str, chain: &'static str, args: &[&str]) -> Rule {
        Rule { table, chain, rule: args.iter().map(|a| a.to_string()).collect() }
    }

    /// The command line that `action`s the rule (`-A`, `-D`), for errors.
    fn describe(&self, binary: &str, action: &str) -> String {
        format!("{binary} -t {} {action} {} {}", self.table, self.chain, self.rule.join(" "))
    }
}

fn run(binary: &str, rule: &Rule, action: &str) -> std::io::Result<Output> {
    Command::new(binary).args(["-w", "-t", rule.table, action, rule.chain]).args(&rule.rule).output()
}

/// `binary -A`: appends one copy of the rule. Errors name the command and
/// say what iptables said.
pub fn append(binary: &str, rule: &Rule) -> Result<(), String> {
    checked(binary, rule, "-A")
}

/// `binary -D`: deletes one copy of the rule.
pub fn delete(binary: &str, rule: &Rule) -> Result<(), String> {
    checked(binary, rule, "-D")
}

fn checked(binary: &str, rule: &Rule, action: &str) -> Result<(), String> {
    let output = run(binary, rule, action).map_err(|e| format!("running {binary}: {e}"))?;
    if !output.status.success() {
        return Err(format!("{}: {}", rule.describe(binary, action), String::from_utf8_lossy(&output.stderr).trim()));
    }
    Ok(())
}

/// Appends the rules; copies left by an earlier run are deleted first.
pub fn add(binary: &str, rules: &[Rule]) -> Result<(), String> {
    remove(binary, rules);
    rules.iter().try_for_each(|rule| append(binary, rule))
}

/// Deletes every copy of the rules (an error means there is none left).
pub fn remove(binary: &str, rules: &[Rule]) {
    for rule in rules {
        while run(binary, rule, "-D").is_ok_and(|output| output.status.success()) {}
    }
}
