//! Skills: packaged know-how the agents can load when a question needs it.
//!
//! A skills directory (`[ai] skills_dir`) holds one folder per skill. Each
//! folder has a `SKILL.md`: a front matter block between `---` lines with
//! a `name:` and a `description:` (YAML, read by `yaml-rust2`; other keys
//! are ignored), then
//! markdown instructions. Any other regular file in the folder is one of
//! the skill's scripts, shown to the model as text.
//!
//! This module owns reading and checking that directory ([`Skills::load`]),
//! the catalogue the agents see in their instruction
//! ([`Skills::catalogue`]) and what the `load_skill` tool returns
//! ([`Skill::render`]). It leaves to others when to load (start and
//! reload, off the runtime), the `load_skill` tool itself, and running
//! anything: a script's lines reach the target only as `run_command`
//! calls, under the approval policy, like any other command.

use std::fs;
use std::path::Path;

use crate::config::{Config, ConfigError};

/// The file in each skill's folder that names and describes it.
const SKILL_FILE: &str = "SKILL.md";
/// The largest script shown to the model; bigger files are skipped (they
/// would eat the context, and a script that long is not a checklist).
const MAX_SCRIPT_BYTES: u64 = 16 * 1024;
/// The longest description: the catalogue is sent with every request, so
/// each entry must stay a line.
const MAX_DESCRIPTION_CHARS: usize = 200;

/// One skill, as read from its folder.
#[derive(Debug, Clone)]
pub(crate) struct Skill {
    pub(crate) name: String,
    pub(crate) description: String,
    /// The markdown after the front matter, trimmed.
    pub(crate) instructions: String,
    /// The folder's other files: (file name, content), sorted by name.
    pub(crate) scripts: Vec<(String, String)>,
}

/// Every skill of a skills directory.
#[derive(Debug, Clone, Default)]
pub(crate) struct Skills {
    /// Sorted by name, so the catalogue is stable and `get` can search.
    skills: Vec<Skill>,
}

impl Skills {
    /// The skills of the config's `ai.skills_dir` (none without one). A
    /// broken skill is an error naming that key's file and line.
    pub(crate) fn configured(config: &Config) -> Result<Skills, ConfigError> {
        match &config.ai.skills_dir {
            Some(dir) => Skills::load(dir.get_ref())
                .map_err(|e| config.error_at(Some(dir.span()), "ai.skills_dir", &e)),
            None => Ok(Skills::default()),
        }
    }

    /// Reads every skill under `dir`. Blocking (call at start/reload, off
    /// the runtime). Err is one line naming the file (and line when it is
    /// about the front matter): a missing SKILL.md in a folder, a missing
    /// name or description, a duplicate name, a name that is not
    /// [a-z0-9-]+, a description over 200 chars.
    pub(crate) fn load(dir: &Path) -> Result<Skills, String> {
        let mut skills: Vec<Skill> = Vec::new();
        for folder in skill_folders(dir)? {
            let skill = load_skill(&folder)?;
            if skills.iter().any(|s| s.name == skill.name) {
                return Err(format!(
                    "{}: the skill name {:?} is used by another skill",
                    folder.join(SKILL_FILE).display(),
                    skill.name
                ));
            }
            skills.push(skill);
        }
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(Skills { skills })
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.skills.iter().map(|s| s.name.as_str())
    }

    pub(crate) fn get(&self, name: &str) -> Option<&Skill> {
        self.skills
            .binary_search_by(|s| s.name.as_str().cmp(name))
            .ok()
            .map(|i| &self.skills[i])
    }

    /// The list the agents see in their instruction: one line per skill,
    /// "- name: description". Empty when there are no skills.
    pub(crate) fn catalogue(&self) -> String {
        self.skills
            .iter()
            .map(|s| format!("- {}: {}", s.name, s.description))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Skill {
    /// What the `load_skill` tool returns to the model: the instructions,
    /// then each script as a fenced block with its file name, and a last
    /// line saying that scripts run on the target only through
    /// run_command (one line per command; the policy applies), never
    /// directly.
    pub(crate) fn render(&self) -> String {
        let mut out = self.instructions.clone();
        for (file, content) in &self.scripts {
            let fence = fence_for(content);
            out.push_str(&format!(
                "\n\nScript `{file}`:\n{fence}\n{}\n{fence}",
                content.trim_end()
            ));
        }
        out.push_str(
            "\n\nRun this skill's commands and scripts on the target only through \
             run_command, one line per command (the approval policy applies to each); \
             never run or copy a script file directly.",
        );
        out
    }
}

/// The skill folders under `dir`, sorted so errors come in a stable order.
/// Hidden entries (`.git`, editor leftovers) and loose files (a README)
/// are not skills.
fn skill_folders(dir: &Path) -> Result<Vec<std::path::PathBuf>, String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut folders = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        // Follows symlinks: a packaged skill linked into place is a skill.
        if !hidden && path.is_dir() {
            folders.push(path);
        }
    }
    folders.sort();
    Ok(folders)
}

/// Reads one skill's folder: its SKILL.md, then its scripts.
fn load_skill(folder: &Path) -> Result<Skill, String> {
    let file = folder.join(SKILL_FILE);
    let where_ = file.display().to_string();
    if !file.is_file() {
        return Err(format!("{where_}: missing (every skill folder needs one)"));
    }
    let text = fs::read_to_string(&file).map_err(|e| format!("{where_}: {e}"))?;
    let doc = parse_skill_md(&text).map_err(|e| format!("{where_}:{e}"))?;
    Ok(Skill {
        name: doc.name,
        description: doc.description,
        instructions: doc.instructions,
        scripts: read_scripts(folder)?,
    })
}

/// What a SKILL.md says.
#[derive(Debug)]
struct SkillMd {
    name: String,
    description: String,
    instructions: String,
}

/// Whether a SKILL.md's text reads: what the fuzzed property calls.
#[cfg(any(fuzzing, test))]
pub(crate) fn check_skill_md(text: &str) -> Result<(), String> {
    parse_skill_md(text).map(|_| ())
}

/// Parses a SKILL.md. Err is "LINE: what is wrong", for the caller to put
/// the file name in front of. The front matter is YAML, read by a YAML
/// parser (`description: >-` and quoted or folded values mean what YAML
/// says); lines are found by their unindented `key:` for the messages.
fn parse_skill_md(text: &str) -> Result<SkillMd, String> {
    // Editors on some systems save a byte order mark; it is not content.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    if lines.next().map(|(_, l)| l.trim_end()) != Some("---") {
        return Err("1: a SKILL.md starts with a front matter block between `---` lines".into());
    }
    let mut block = Vec::new();
    let mut at: [Option<usize>; 2] = [None, None];
    let mut end = None;
    for (n, line) in lines.by_ref() {
        if line.trim_end() == "---" {
            end = Some(n);
            break;
        }
        block.push(line);
        let Some((key, _)) = line.split_once(':') else {
            continue;
        };
        let slot = match key {
            "name" => &mut at[0],
            "description" => &mut at[1],
            _ => continue,
        };
        if slot.is_some() {
            return Err(format!("{n}: `{key}` is given twice"));
        }
        *slot = Some(n);
    }
    let Some(end) = end else {
        return Err("1: the front matter has no closing `---` line".into());
    };
    let doc = front_matter(&block.join("\n"))?;
    let value = |key: &str, line: Option<usize>| -> Result<Option<(usize, String)>, String> {
        let n = line.unwrap_or(end);
        match &doc[key] {
            yaml_rust2::Yaml::BadValue | yaml_rust2::Yaml::Null => Ok(None),
            yaml_rust2::Yaml::String(s) => Ok(Some((n, s.trim().to_string()))),
            _ => Err(format!("{n}: `{key}` must be text")),
        }
    };
    let name = check_name(value("name", at[0])?, end)?;
    let description = check_description(value("description", at[1])?, end)?;
    let instructions = lines.map(|(_, l)| l).collect::<Vec<_>>().join("\n");
    Ok(SkillMd {
        name,
        description,
        instructions: instructions.trim().to_string(),
    })
}

/// Front matter longer than this is refused: it is a name and a line.
const FRONT_MATTER_MAX: usize = 16 * 1024;

/// The front matter block (the file's lines 2 on) as a YAML mapping.
/// Aliases (`*name`) are refused before the block is loaded: the loader
/// copies what each names, so a few lines of nested aliases would take
/// exponential memory.
fn front_matter(block: &str) -> Result<yaml_rust2::Yaml, String> {
    if block.len() > FRONT_MATTER_MAX {
        return Err(format!(
            "2: the front matter is over {} KiB",
            FRONT_MATTER_MAX >> 10
        ));
    }
    let mut events = yaml_rust2::parser::Parser::new_from_str(block);
    loop {
        match events.next_token() {
            Ok((yaml_rust2::parser::Event::StreamEnd, _)) => break,
            Ok((yaml_rust2::parser::Event::Alias(_), mark)) => {
                let line = mark.line() + 1;
                return Err(format!(
                    "{line}: YAML aliases (`*name`) are not read in a SKILL.md"
                ));
            }
            Ok(_) => {}
            Err(e) => return Err(format!("{}: {}", e.marker().line() + 1, e.info())),
        }
    }
    let docs = yaml_rust2::YamlLoader::load_from_str(block)
        .map_err(|e| format!("{}: {}", e.marker().line() + 1, e.info()))?;
    match docs.into_iter().next() {
        None => Ok(yaml_rust2::Yaml::Null),
        Some(doc @ yaml_rust2::Yaml::Hash(_)) => Ok(doc),
        Some(_) => Err("2: the front matter is not a list of `key: value` lines".into()),
    }
}

/// The name must be present and [a-z0-9-]+: it is what the model passes
/// to `load_skill`, so it has to survive being typed back exactly.
fn check_name(name: Option<(usize, String)>, end: usize) -> Result<String, String> {
    let Some((n, name)) = name.filter(|(_, v)| !v.is_empty()) else {
        return Err(format!("{end}: the front matter has no `name`"));
    };
    let valid = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid {
        return Err(format!(
            "{n}: the name {name:?} may only hold lowercase letters, digits and `-`"
        ));
    }
    Ok(name)
}

/// The description must be present and short: it is the skill's line in
/// the catalogue.
fn check_description(description: Option<(usize, String)>, end: usize) -> Result<String, String> {
    let Some((n, description)) = description.filter(|(_, v)| !v.is_empty()) else {
        return Err(format!("{end}: the front matter has no `description`"));
    };
    let chars = description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "{n}: the description is {chars} characters long, more than {MAX_DESCRIPTION_CHARS}"
        ));
    }
    Ok(description)
}

/// The folder's scripts: every regular file but SKILL.md, sorted by name.
/// One that is too big or not UTF-8 is skipped with a warning, not an
/// error: the skill's instructions are still worth having.
fn read_scripts(folder: &Path) -> Result<Vec<(String, String)>, String> {
    let entries = fs::read_dir(folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    let mut scripts = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| format!("{}: {e}", folder.display()))?;
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name == SKILL_FILE {
            continue;
        }
        if let Some(content) = read_script(&entry.path()) {
            scripts.push((file_name, content));
        }
    }
    scripts.sort();
    Ok(scripts)
}

/// One script's text, or None (with a warning saying why) when it is not
/// something to show the model.
fn read_script(path: &Path) -> Option<String> {
    let skip = |why: &str| {
        tracing::warn!(file = %path.display(), "skill file skipped: {why}");
        None
    };
    let meta = match fs::metadata(path) {
        Ok(meta) => meta,
        Err(e) => return skip(&e.to_string()),
    };
    if !meta.is_file() {
        return skip("not a regular file");
    }
    if meta.len() > MAX_SCRIPT_BYTES {
        return skip("larger than 16 KiB");
    }
    match fs::read(path).map(String::from_utf8) {
        Ok(Ok(text)) => Some(text),
        Ok(Err(_)) => skip("not UTF-8 text"),
        Err(e) => skip(&e.to_string()),
    }
}

/// A code fence longer than any run of backticks in `content`, so a
/// script that holds a fence cannot close ours early.
fn fence_for(content: &str) -> String {
    let longest = content.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    "`".repeat(longest.max(2) + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::policy::{Policy, Verdict};
    use crate::config::AiMode;
    use std::path::PathBuf;

    /// Writes `files` (path relative to the temp dir, content) and returns
    /// the dir, kept alive by the caller.
    fn tree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for (path, content) in files {
            let path: PathBuf = dir.path().join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, content).unwrap();
        }
        dir
    }

    fn skill_md(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nDo things.\n")
    }

    /// The error of loading a tree with one skill folder `x` holding `md`.
    fn error_of(md: &str) -> String {
        let dir = tree(&[("x/SKILL.md", md.as_bytes())]);
        let err = Skills::load(dir.path()).unwrap_err();
        assert!(!err.contains('\n'), "not one line: {err}");
        assert!(err.contains("x/SKILL.md"), "no file: {err}");
        err
    }

    #[test]
    fn loads_skills_sorted_with_their_scripts() {
        let b = skill_md("beta", "Second skill");
        let a = "---\nname: alpha\nauthor: someone\ntags:\n  - x\ndescription: \"First: one\"\n---\n\nStep one.\n";
        let dir = tree(&[
            ("b/SKILL.md", b.as_bytes()),
            ("b/check.sh", b"df -h\ndf -i\n"),
            ("b/aaa.txt", b"notes"),
            ("a/SKILL.md", a.as_bytes()),
            ("README.md", b"not a skill"),
            (".hidden/whatever", b""),
        ]);
        let skills = Skills::load(dir.path()).unwrap();
        assert_eq!(skills.names().collect::<Vec<_>>(), ["alpha", "beta"]);
        let alpha = skills.get("alpha").unwrap();
        assert_eq!(alpha.description, "First: one");
        assert_eq!(alpha.instructions, "Step one.");
        assert!(alpha.scripts.is_empty());
        let beta = skills.get("beta").unwrap();
        assert_eq!(beta.instructions, "# beta\n\nDo things.");
        assert_eq!(
            beta.scripts,
            [
                ("aaa.txt".to_string(), "notes".to_string()),
                ("check.sh".to_string(), "df -h\ndf -i\n".to_string()),
            ]
        );
        assert!(skills.get("gamma").is_none());
        assert!(!skills.is_empty());
    }

    #[test]
    fn an_empty_directory_has_no_skills() {
        let dir = tree(&[]);
        let skills = Skills::load(dir.path()).unwrap();
        assert!(skills.is_empty());
        assert_eq!(skills.catalogue(), "");
    }

    #[test]
    fn scripts_too_big_or_not_utf8_are_skipped() {
        let md = skill_md("s", "d");
        let big = vec![b'a'; 16 * 1024 + 1];
        let dir = tree(&[
            ("s/SKILL.md", md.as_bytes()),
            ("s/big.sh", &big),
            ("s/exact.sh", &big[..16 * 1024]),
            ("s/binary", b"\xff\xfe\x00"),
            ("s/sub/inner.sh", b"ls"),
        ]);
        let skills = Skills::load(dir.path()).unwrap();
        let names: Vec<_> = skills
            .get("s")
            .unwrap()
            .scripts
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(names, ["exact.sh"]);
    }

    #[test]
    fn a_folder_without_skill_md_is_an_error() {
        let md = skill_md("a", "d");
        let dir = tree(&[("a/SKILL.md", md.as_bytes()), ("b/run.sh", b"ls")]);
        let err = Skills::load(dir.path()).unwrap_err();
        assert!(
            err.ends_with("b/SKILL.md: missing (every skill folder needs one)"),
            "{err}"
        );
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        let dir = tree(&[]);
        let err = Skills::load(&dir.path().join("nope")).unwrap_err();
        assert!(err.contains("nope"), "{err}");
    }

    #[test]
    fn yaml_aliases_are_refused_before_they_are_expanded() {
        // Nine levels of ten aliases each: a billion copies if loaded.
        let mut md = String::from("---\nname: bomb\ndescription: x\na0: &a0 [lol]\n");
        for i in 1..10 {
            let row = vec![format!("*a{}", i - 1); 10].join(", ");
            md.push_str(&format!("a{i}: &a{i} [{row}]\n"));
        }
        md.push_str("---\n");
        let err = parse_skill_md(&md).unwrap_err();
        assert!(err.starts_with("5: YAML aliases"), "{err}");
        let big = format!("---\nname: a\ndescription: {}\n---\n", "x".repeat(20_000));
        assert!(parse_skill_md(&big).unwrap_err().contains("over 16 KiB"));
    }

    #[test]
    fn the_front_matter_is_read_as_yaml() {
        let md = "---\nname: disk-usage\ndescription: >-\n  Finds what fills a disk\n  and says what to remove.\nmetadata:\n  tags: [ops, disk]\n---\n# Steps\n";
        let doc = parse_skill_md(md).unwrap();
        assert_eq!(doc.name, "disk-usage");
        assert_eq!(
            doc.description,
            "Finds what fills a disk and says what to remove."
        );
        assert_eq!(doc.instructions, "# Steps");
        let quoted =
            parse_skill_md("---\nname: 'a'\ndescription: \"say: \\\"hi\\\"\"\n---\n").unwrap();
        assert_eq!(quoted.description, "say: \"hi\"");
        // YAML's own errors keep the file's line.
        let err = parse_skill_md("---\nname: a\ndescription: [unclosed\n---\n").unwrap_err();
        assert!(err.starts_with("4:") || err.starts_with("3:"), "{err}");
        let err = parse_skill_md("---\nname: [a, b]\ndescription: d\n---\n").unwrap_err();
        assert_eq!(err, "2: `name` must be text");
    }

    #[test]
    fn front_matter_errors_name_the_line() {
        let cases = [
            ("# no front matter\n", "SKILL.md:1: a SKILL.md starts with"),
            (
                "---\nname: a\ndescription: d\n",
                "SKILL.md:1: the front matter has no closing",
            ),
            (
                "---\ndescription: d\n---\n",
                "SKILL.md:3: the front matter has no `name`",
            ),
            (
                "---\nname:\ndescription: d\n---\n",
                "SKILL.md:4: the front matter has no `name`",
            ),
            (
                "---\nname: a\n---\n",
                "SKILL.md:3: the front matter has no `description`",
            ),
            (
                "---\nname: a\nname: b\ndescription: d\n---\n",
                "SKILL.md:3: `name` is given twice",
            ),
        ];
        for (md, want) in cases {
            let err = error_of(md);
            assert!(err.contains(want), "{md:?}: {err}");
        }
    }

    #[test]
    fn names_must_be_lowercase_letters_digits_and_dashes() {
        for bad in ["Disk", "disk_full", "disk full", "dïsk", "../x"] {
            let err = error_of(&format!("---\ndescription: d\nname: {bad}\n---\n"));
            assert!(err.contains("SKILL.md:3: the name"), "{bad}: {err}");
        }
        let dir = tree(&[("x/SKILL.md", skill_md("disk-full-2", "d").as_bytes())]);
        assert!(Skills::load(dir.path()).is_ok());
    }

    #[test]
    fn descriptions_over_200_chars_are_refused() {
        let ok = "é".repeat(200);
        let dir = tree(&[("x/SKILL.md", skill_md("a", &ok).as_bytes())]);
        assert!(Skills::load(dir.path()).is_ok());
        let err = error_of(&skill_md("a", &"é".repeat(201)));
        assert!(
            err.contains("SKILL.md:3: the description is 201 characters"),
            "{err}"
        );
    }

    #[test]
    fn duplicate_names_are_refused() {
        let md = skill_md("same", "d");
        let dir = tree(&[("a/SKILL.md", md.as_bytes()), ("b/SKILL.md", md.as_bytes())]);
        let err = Skills::load(dir.path()).unwrap_err();
        assert!(
            err.contains("b/SKILL.md: the skill name \"same\" is used by another"),
            "{err}"
        );
    }

    #[test]
    fn catalogue_is_one_line_per_skill() {
        let dir = tree(&[
            ("z/SKILL.md", skill_md("zed", "Last one").as_bytes()),
            (
                "y/SKILL.md",
                skill_md("disk-full", "A filesystem is full").as_bytes(),
            ),
        ]);
        let skills = Skills::load(dir.path()).unwrap();
        assert_eq!(
            skills.catalogue(),
            "- disk-full: A filesystem is full\n- zed: Last one"
        );
    }

    #[test]
    fn render_gives_instructions_scripts_and_the_rule() {
        let skill = Skill {
            name: "s".into(),
            description: "d".into(),
            instructions: "Check the disk.".into(),
            scripts: vec![
                ("a.sh".into(), "df -h\n".into()),
                ("b.md".into(), "```\nls\n```\n".into()),
            ],
        };
        assert_eq!(
            skill.render(),
            "Check the disk.\n\n\
             Script `a.sh`:\n```\ndf -h\n```\n\n\
             Script `b.md`:\n````\n```\nls\n```\n````\n\n\
             Run this skill's commands and scripts on the target only through run_command, \
             one line per command (the approval policy applies to each); \
             never run or copy a script file directly."
        );
    }

    #[test]
    fn render_without_scripts_still_says_the_rule() {
        let skill = Skill {
            name: "s".into(),
            description: "d".into(),
            instructions: "Look.".into(),
            scripts: vec![],
        };
        let text = skill.render();
        assert!(
            text.starts_with("Look.\n\nRun this skill's commands"),
            "{text}"
        );
        assert_eq!(text.lines().count(), 3);
    }

    /// The skills shipped in `etc/skills`.
    fn shipped() -> Skills {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/skills");
        Skills::load(&dir).unwrap()
    }

    #[test]
    fn the_shipped_skills_load() {
        let skills = shipped();
        assert_eq!(
            skills.names().collect::<Vec<_>>(),
            ["disk-full", "nginx-5xx", "service-wont-start"]
        );
        let scripts = &skills.get("disk-full").unwrap().scripts;
        assert_eq!(scripts[0].0, "biggest-dirs.sh");
    }

    /// Their scripts are sent line by line through run_command, so every
    /// line must be one read-only command the policy runs unasked.
    #[test]
    fn the_shipped_scripts_are_read_only_one_command_per_line() {
        let policy = Policy::new(&[], &["?".to_string()], false);
        for skill in shipped().skills {
            for (file, content) in &skill.scripts {
                for line in content.lines() {
                    let verdict = policy.check(line, AiMode::Auto);
                    assert!(
                        matches!(verdict, Verdict::Run(_)),
                        "{}/{file}: {line}: {verdict:?}",
                        skill.name
                    );
                }
            }
        }
    }

    /// No command the shipped instructions suggest is one the policy
    /// refuses (a code span that is not a command at all, such as a quoted
    /// log line bash's grammar cannot read, is left out).
    #[test]
    fn the_shipped_instructions_suggest_nothing_the_policy_denies() {
        let policy = Policy::new(&[], &["?".to_string()], false);
        for skill in shipped().skills {
            // A code span may wrap across lines; markdown reads that as a space.
            let text = skill
                .instructions
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            for span in text.split('`').skip(1).step_by(2) {
                let verdict = policy.check(span, AiMode::Auto);
                let not_a_command =
                    matches!(&verdict, Verdict::Deny(why) if why.contains("cannot check it"));
                assert!(
                    not_a_command || !matches!(verdict, Verdict::Deny(_)),
                    "{}: {span}: {verdict:?}",
                    skill.name
                );
            }
        }
    }
}
