//! The redactor as walissh builds it: from the config (`for_config`),
//! with the credentials the bastion holds (`held`). The redactor itself
//! is the `walissh-redact` crate (crates/walissh-redact): which parts of
//! a text are secrets, and what the model sees instead.
//!
//! What it leaves to others: finding secrets (`walissh_redact`), checking
//! the config's patterns and reading its rules file (`config`).

#[cfg(any(fuzzing, test))]
pub(crate) use walissh_redact::plain_text;
pub(crate) use walissh_redact::{Counts, Numbering, Redactor};
use walissh_redact::{Origin, Rules, compile_pattern};

use crate::config::{Config, ConfigError};

/// The redactor a config asks for: the agent's, and `walissh redact`'s,
/// so the two cannot differ. `[ai] redact`'s patterns, the credentials
/// the bastion holds ([`held`]), `[context] redact_rules` (the file as
/// read at load) and `redact_allow`. An Err names the config's file,
/// line and key, and for a rules file, the rule and what is wrong.
pub(crate) fn for_config(config: &Config) -> Result<Redactor, ConfigError> {
    let c = &config.context;
    let operator = match &c.redact_rules_file {
        None => Rules::empty(),
        Some(file) => Rules::parse(&file.text, Origin::Operator).map_err(|e| {
            let span = c.redact_rules.as_ref().map(|p| p.span());
            let msg = format!("{}: {e}", file.path.display());
            config.error_at(span, "context.redact_rules", &msg)
        })?,
    };
    let allow = c
        .redact_allow
        .iter()
        .map(|p| {
            compile_pattern(p.get_ref()).map_err(|e| {
                let msg = format!("bad regex: {e}");
                config.error_at(Some(p.span()), "context.redact_allow", &msg)
            })
        })
        .collect::<Result<_, _>>()?;
    let extra: Vec<String> = config
        .ai
        .redact
        .iter()
        .map(|p| p.get_ref().clone())
        .collect();
    Redactor::build(&extra, &held(config), operator, allow)
        .map_err(|e| config.error_at(None, "ai.redact", &e))
}

/// The credentials the bastion holds, which never reach the model,
/// whatever prints them: target passwords and the model's API key,
/// from the environment variables the config names.
pub(crate) fn held(config: &Config) -> Vec<String> {
    let mut held: Vec<String> = config
        .targets
        .iter()
        .filter_map(|t| t.password_env.as_ref())
        .filter_map(|var| std::env::var(var.get_ref()).ok())
        .collect();
    if let Some(var) = &config.llm.api_key_env {
        held.extend(std::env::var(var).ok());
    }
    held
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RulesFile;

    const ACME: &str = "[[rules]]\nid = \"acme-token\"\nregex = \'\'\'acme_[a-z0-9]{20}\'\'\'\n";

    /// The agent's redactor and `walissh redact`'s come from the config one
    /// way; a rules file's fault is named by the config's file, line and
    /// key, the rules file, the rule and why.
    #[test]
    fn the_config_builds_the_redactor_and_names_a_bad_rule() {
        let text = "[ai]\nredact = [\"corp-[0-9]{6}\"]\n\n[context]\nredact_allow = [\"^changeme$\"]\nredact_rules = \"r.toml\"\n";
        // The file is read at load, from disk: here it is given as read.
        let mut config =
            Config::parse(&text.replace("redact_rules", "# "), "w.toml", false).unwrap();
        let r = for_config(&config).unwrap();
        let (out, _) = r.redact("id corp-123456\npassword=changeme\n", &Default::default());
        assert_eq!(out, "id [REDACTED:custom#1]\npassword=changeme\n");
        config.context.redact_rules_file = Some(RulesFile {
            path: "/etc/walissh/r.toml".into(),
            text: format!("{ACME}\n[[rules]]\nid = \"loose\"\nregex = '''a?'''\n"),
        });
        let e = for_config(&config).err().unwrap().0;
        assert_eq!(
            e,
            "w.toml:1: key `context.redact_rules`: /etc/walissh/r.toml: \
                 rule 2 `loose`: regex: it matches the empty string"
        );
        config.context.redact_rules_file.as_mut().unwrap().text = ACME.into();
        let r = for_config(&config).unwrap();
        let token = format!("acme_{}", "z9".repeat(10));
        assert_eq!(r.explain(&token)[0].rule, "operator:acme-token");
    }
}
