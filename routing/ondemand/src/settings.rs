//! The config file of a daemon: a TOML file of tables (the protocol's and
//! `[daemon]`) with `--set TABLE.KEY=VALUE` overrides applied on top.

use std::fs;
use std::path::Path;

/// The file's tables (none without a file) with the overrides applied.
/// Errors name the file or the override.
pub fn load_table(file: Option<&Path>, overrides: &[String]) -> Result<toml::Table, String> {
    let mut table: toml::Table = match file {
        Some(path) => {
            let text = fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            text.parse().map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => toml::Table::new(),
    };
    for entry in overrides {
        let (key, value) = entry.split_once('=').ok_or_else(|| format!("--set {entry}: expected TABLE.KEY=VALUE"))?;
        let (section, field) = key.split_once('.').ok_or_else(|| format!("--set {entry}: expected TABLE.KEY"))?;
        // A bare word that is not TOML (true, 12, "x") is taken as a string.
        let value: toml::Value = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        let section = table
            .entry(section.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .ok_or_else(|| format!("--set {entry}: {section} is not a table"))?;
        section.insert(field.to_string(), value);
    }
    Ok(table)
}
