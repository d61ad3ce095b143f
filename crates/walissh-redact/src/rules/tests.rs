//! Tests of `rules`.

use super::*;

#[test]
fn every_vendored_rule_compiles_and_none_matches_nothing() {
    let rules = Rules::load().unwrap();
    assert!(rules.len() >= 200, "{} rules", rules.len());
    assert!(VERSION.starts_with('v'));
}

/// A rule run without its lead (`Lead`), and tried at its keywords
/// (`Anchored`), finds what its whole pattern finds: the same
/// matches, from the same starts, with the same groups, checked
/// against the regex crate on the whole pattern.
#[test]
fn a_rule_without_its_lead_matches_as_the_whole_pattern() {
    #[derive(serde::Deserialize)]
    struct Raw {
        rules: Vec<RawRegex>,
    }
    #[derive(serde::Deserialize)]
    struct RawRegex {
        id: String,
        regex: Option<String>,
    }
    let raw: Raw = toml::from_str(GITLEAKS).unwrap();
    let rules = Rules::load().unwrap();
    let mut texts = vec![
        super::super::corpus::bulk(32 << 10),
        // Runs longer than the lead's bound before a keyword, a match
        // right after another, keywords inside the run, at the start.
        format!("{}api_key = \"Zx9Qw3Er5Ty7Ui1Op2As4Df6\"\n", "a".repeat(70)),
        "key=Zx9Qw3Er5Ty7Ui1Op2\nsecret_token=Zx9Qw3Er5Ty7Ui1Op2 auth=Zx9Qw3Er5Ty7Ui1Op2"
            .to_string(),
        "my.password.key-secret_auth: Zx9Qw3Er5Ty7Ui1Op2As4,token:Zx9Qw3Er5Ty7Ui1Op2As4\n"
            .to_string(),
        "random_access_key=AbCdEfGh1234567890 x-api-version=2024-11-30T10:00:00".to_string(),
        // A match that ends in a lead's byte (JSON's `\n`, escaped):
        // the next one's lead stops there.
        "{\"env\": \"key=Zx9Qw3Er5Ty7Ui1Op2\\nmy_token=Zx9Qw3Er5Ty7Ui1Op2\\n\"}".to_string(),
    ];
    for word in [
        "discord",
        "mailgun",
        "lob",
        "gocardless",
        "password",
        "sumologic",
        "heroku",
    ] {
        texts.push(format!(
                "{0}_{1}_api_key = 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n{0}{0}: key-0123456789abcdef0123456789abcdef\n",
                "x.y-z".repeat(12),
                word
            ));
    }
    let (mut led, mut anchored, mut located) = (0, 0, 0);
    for r in raw.rules {
        let Some(pattern) = r.regex else { continue };
        let Some(index) = rules.rules.iter().position(|x| x.id == r.id) else {
            continue;
        };
        let rule = &rules.rules[index];
        let Some(lead) = &rule.lead else { continue };
        led += 1;
        anchored += usize::from(lead.anchored.is_some());
        let whole = compile(&pattern).unwrap();
        for text in &texts {
            let text = text.as_bytes();
            let expected: Vec<Vec<Option<Range<usize>>>> = whole
                .captures_iter(text)
                .map(|c| c.iter().map(|m| m.map(|m| m.range())).collect())
                .collect();
            let got = rule.matches(text, None);
            assert_eq!(got, expected, "{}", r.id);
            // Tried where the prefilter found its literals, the same.
            if let Some(places) = &rules.keywords.sites(text).places[index] {
                assert_eq!(
                    rule.matches(text, Some(places)),
                    expected,
                    "{} (given)",
                    r.id
                );
                located += 1;
            }
        }
    }
    assert!(led >= 90, "{led} rules with a lead");
    assert!(anchored >= 90, "{anchored} of them tried at their keywords");
    assert!(
        located >= 70 * texts.len(),
        "{located} tries where the prefilter found the keywords"
    );
}

#[test]
fn a_rule_that_matches_the_empty_string_is_refused() {
    let file = "[[rules]]\nid = \"bad\"\nregex = '''x*'''\nkeywords = [\"x\"]\n";
    let err = Rules::parse(file, Origin::Gitleaks).err().unwrap();
    assert!(err.contains("bad") && err.contains("empty"), "{err}");
    let file = "[[rules]]\nid = \"broken\"\nregex = '''(x'''\n";
    assert!(
        Rules::parse(file, Origin::Gitleaks)
            .err()
            .unwrap()
            .contains("broken")
    );
}

#[test]
fn rules_find_their_secrets_and_allow_lists_let_go() {
    let rules = Rules::load().unwrap();
    let ids = |t: &str| -> Vec<String> {
        rules
            .find(t.as_bytes())
            .iter()
            .map(|f| format!("{}={}", rules.id(f.rule), &t[f.span.clone()]))
            .collect()
    };
    let age = "AGE-SECRET-KEY-1QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ";
    assert!(
        ids(age).iter().any(|f| f.starts_with("age-secret-key=")),
        "{:?}",
        ids(age)
    );
    let vault = "token: hvs.CAESIJlWh3X9ZjYzWJ0rjKNb6NjXa2QbGT5Q3BbUo3y1RhWOGh4KHGh2cy5oOHZ2Q3VzR2ZpV0V5dU1aZ2pnY1FLUDM";
    assert!(
        ids(vault).iter().any(|f| f.contains("vault")),
        "{:?}",
        ids(vault)
    );
    // A keyword with nothing secret after it: nothing found, and the
    // rules without the keyword never ran.
    assert!(ids("the api answered in 20 ms").is_empty());
}

/// Each rule over the whole text once one of its keywords is anywhere
/// in it, as gitleaks runs them.
fn find_whole(rules: &Rules, text: &[u8]) -> Vec<Found> {
    let run = rules.keywords.open(text);
    let mut found = Vec::new();
    for i in (0..rules.len()).filter(|&i| run[i]) {
        rules.find_in(i, text, 0..text.len(), None, &mut found);
    }
    found
}

#[test]
fn reading_around_keywords_finds_what_reading_everything_finds() {
    let rules = Rules::load().unwrap();
    let text = crate::corpus::bulk(256 << 10);
    let windowed = rules.find(text.as_bytes());
    let whole = find_whole(&rules, text.as_bytes());
    assert!(whole.len() > 300, "{} findings", whole.len());
    let missed: Vec<_> = whole
        .iter()
        .filter(|f| !windowed.contains(f))
        .map(|f| format!("{}: {:?}", rules.id(f.rule), &text[f.span.clone()]))
        .collect();
    assert!(missed.is_empty(), "{missed:#?}");
}

/// A keyword need not be in the match: Airtable's token two lines
/// below the word, in JSON. It still opens the rule only somewhere in
/// the text, as gitleaks runs it.
#[test]
fn a_keyword_opens_its_rule_and_the_match_is_found_where_it_is() {
    let rules = Rules::load().unwrap();
    let token = format!("pat{}.{}", "Q3vX9kLm2Rt7bW", "3f9a1c7e".repeat(8));
    let airtable = |text: &str| {
        rules
            .find(text.as_bytes())
            .iter()
            .any(|f| rules.id(f.rule) == "airtable-personnal-access-token")
    };
    let json = format!("{{\n  \"provider\": \"airtable\",\n  \"pat\": \"{token}\"\n}}\n");
    assert!(airtable(&json), "{json}");
    let far = format!("airtable\n{}\"pat\": \"{token}\"\n", "x\n".repeat(500));
    assert!(airtable(&far));
    assert!(!airtable(&format!("\"pat\": \"{token}\"\n")));
}

#[test]
fn go_patterns_read_as_go_reads_them() {
    assert_eq!(from_go(r"\$?{{[^}]+}}"), r"\$?\{\{[^}]+\}\}");
    assert_eq!(from_go(r"a{2,5}b{3}c{1,}"), r"a{2,5}b{3}c{1,}");
    assert_eq!(from_go(r"[^]]+"), r"[^\]]+");
    assert_eq!(from_go(r"\{x"), r"\{x");
    for p in [r"\$?{{[^}]+}}", r"[^:]+:\[[^]]+]", r"x{2}"] {
        compile(&format!("a{p}")).unwrap();
    }
}

/// An operator's file is held to more than the vendored one: each
/// refusal names the rule (number and id) or the TOML line, in one line.
#[test]
fn an_operators_rules_are_refused_with_the_rule_and_why() {
    let op = |text: &str| {
        Rules::parse(text, Origin::Operator)
            .err()
            .unwrap_or_default()
    };
    let rule = |id: &str, regex: &str| format!("[[rules]]\nid = {id:?}\nregex = '''{regex}'''\n");
    let good = rule("acme-token", "acme_[a-z0-9]{20}");
    let rules = Rules::parse(&good, Origin::Operator).unwrap();
    assert_eq!(rules.len(), 1);
    let token = format!("x acme_{} y", "a1".repeat(10));
    let found = rules.find(token.as_bytes());
    assert_eq!(found.len(), 1);
    assert_eq!(&token[found[0].span.clone()], &token[2..27]);
    for (text, expected) in [
        (rule("bad", "(x"), "rule 1 `bad`: regex:"),
        (
            rule("empty", "x*"),
            "rule 1 `empty`: regex: it matches the empty string",
        ),
        (
            format!("{good}{}", rule("acme-token", "y+")),
            "rule 2 `acme-token`: the id is used by an earlier rule",
        ),
        (
            "[[rules]]\nid = \"p\"\npath = '''x'''\n".into(),
            "rule 1 `p`: no regex",
        ),
        (
            rule("Acme.Token", "acme"),
            "rule 1 `Acme.Token`: an id is 1 to 64",
        ),
        (
            format!("{good}secretGroup = 2\n"),
            "secretGroup 2 but the regex has 0 groups",
        ),
        (
            format!("{good}[[rules.allowlists]]\nregexes = ['''(''']\n"),
            "rule 1 `acme-token`: allowlist:",
        ),
        (
            "[[rules]]\nregex = 'x'\n".into(),
            "line 1: missing field `id`",
        ),
        ("\n\n[[rules]\n".into(), "line 3:"),
        (
            (0..=MAX_RULES)
                .map(|i| rule(&format!("r{i}"), "xy"))
                .collect(),
            "1001 rules, more than the 1000",
        ),
        (
            format!("# {}\n", "x".repeat(MAX_FILE_BYTES)),
            "bytes, more than",
        ),
    ] {
        let err = op(&text);
        assert!(err.contains(expected), "{expected:?} in {err:?}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // A rule on paths only is left out of the vendored set, not refused.
    let paths = "[[rules]]\nid = \"p\"\npath = '''x'''\n";
    assert_eq!(Rules::parse(paths, Origin::Gitleaks).unwrap().len(), 0);
    assert_eq!(Rules::empty().len(), 0);
    assert!(Rules::empty().find(b"anything at all").is_empty());
}

#[test]
fn an_operators_allow_lists_let_their_values_go() {
    let text = "[allowlist]\nregexes = ['''^acme_0+$''']\n\n[[rules]]\nid = \"acme-token\"\nregex = '''acme_[a-z0-9]{20}'''\nkeywords = [\"acme_\"]\n[[rules.allowlists]]\nstopwords = [\"example\"]\n";
    let rules = Rules::parse(text, Origin::Operator).unwrap();
    let zeros = format!("acme_{}", "0".repeat(20));
    let example = format!("acme_example{}", "1".repeat(13));
    let real = format!("acme_{}", "b2".repeat(10));
    assert!(rules.find(zeros.as_bytes()).is_empty());
    assert!(rules.find(example.as_bytes()).is_empty());
    assert_eq!(rules.find(real.as_bytes()).len(), 1);
}

/// The redactor with an operator's rules and allow-list, as
/// `Redactor::for_config` builds it.
fn operated(rules: &str, allow: &[&str], held: &[&str]) -> super::super::Redactor {
    let allow = allow
        .iter()
        .map(|a| regex::Regex::new(a).unwrap())
        .collect();
    let held: Vec<String> = held.iter().map(|s| s.to_string()).collect();
    let rules = Rules::parse(rules, Origin::Operator).unwrap();
    super::super::Redactor::build(&[], &held, rules, allow).unwrap()
}

const ACME: &str = "[[rules]]\nid = \"acme-token\"\nregex = '''acme_[a-z0-9]{20}'''\n";

#[test]
fn operator_rules_redact_with_their_id_and_come_before_gitleaks() {
    let r = operated(ACME, &[], &[]);
    let token = format!("acme_{}", "c3".repeat(10));
    let text = format!("deploying with {token}\ndone\n");
    let numbering = super::super::Numbering::default();
    let (out, counts) = r.redact(&text, &numbering);
    assert_eq!(out, "deploying with [REDACTED:acme-token#1]\ndone\n");
    assert_eq!(counts.0.get("acme-token"), Some(&1));
    let found = r.explain(&text);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].rule, "operator:acme-token");
    assert_eq!((found[0].start, found[0].end), ((1, 16), (1, 40)));
}

#[test]
fn allowed_values_pass_but_the_bastions_own_credentials_never() {
    let token = format!("ghp_{}", "a1B2".repeat(9));
    let text = format!("password=changeme123\ntoken {token}\nheld hunter2-held\n");
    let none = operated("", &[], &["hunter2-held"]);
    let (out, _) = none.redact(&text, &Default::default());
    assert!(
        !out.contains("changeme123") && !out.contains(&token),
        "{out}"
    );
    // Anchored: the value itself. A search: any part of it.
    let r = operated(
        "",
        &["^changeme[0-9]*$", "a1B2a1B2", "hunter2"],
        &["hunter2-held"],
    );
    let (out, counts) = r.redact(&text, &Default::default());
    assert!(out.contains("password=changeme123\n"), "{out}");
    assert!(out.contains(&token), "{out}");
    assert!(!out.contains("hunter2-held"), "{out}");
    assert_eq!(counts.total(), 1, "{counts:?}");
    let found = r.explain(&text);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].rule, "walissh:bastion-credential");
}

/// `explain` lists what `redact` replaces, in order, with lines and
/// columns in characters of the plain text, and each detector's name.
#[test]
fn explain_lists_what_redact_replaces() {
    let r = super::super::Redactor::new(&["corp-[0-9]{6}".into()], &[]).unwrap();
    let aws = "AKIAIOSFODNN7EXAMPLE";
    let text = format!(
        "\x1b[31mé {aws}\x1b[0m\nid corp-123456\ndb_password = s3cr3t-Value9\nhttps://x.example/?u=%70assword%3D{}\n",
        "Zq9".repeat(4)
    );
    let (out, counts) = r.redact(&text, &Default::default());
    let found = r.explain(&text);
    assert_eq!(found.len(), counts.total(), "{found:#?}\n{out}");
    let listed: Vec<(String, &str)> = found
        .iter()
        .map(|f| {
            let ((l1, c1), (l2, c2)) = (f.start, f.end);
            (format!("{l1}:{c1}-{l2}:{c2}"), f.rule.as_str())
        })
        .collect();
    assert_eq!(listed[0], ("1:3-1:22".into(), "walissh:aws-key"));
    assert_eq!(listed[1], ("2:4-2:14".into(), "ai.redact:1"));
    assert_eq!(listed[2].0, "3:15-3:27");
    assert_eq!(listed[3].1, "url-encoded");
    let plain = super::super::plain::plain(&text);
    assert_eq!(&plain[found[0].span.clone()], aws);
    let kinds: Vec<&str> = found.iter().map(|f| f.kind.as_str()).collect();
    for kind in &kinds {
        assert!(
            out.contains(&format!("[REDACTED:{kind}#")),
            "{kind} in {out}"
        );
    }
}

#[test]
fn entropy_of_uniform_and_repeated_text() {
    assert_eq!(entropy(b"aaaa"), 0.0);
    assert!((entropy(b"abcd") - 2.0).abs() < 1e-9);
}

/// Every allow-list's whole automata (`AnyOf`) answer as the lazy regex
/// of all its regexes does: on every line, word and value of the corpus,
/// and on strings made to end inside a branch or match one at either end.
#[test]
fn allow_lists_built_whole_answer_as_the_regexes_do() {
    let rules = Rules::load().unwrap();
    let bulk = super::super::corpus::bulk(64 << 10);
    let mut targets: Vec<&str> = bulk.lines().collect();
    targets.extend(bulk.split([' ', '=', ':', '"', '\'']));
    targets.extend([
        "",
        "true",
        "xfalsex",
        "null",
        "$1",
        "${HOME}",
        "{{ .Values.secret }}",
        "%s",
        "changeme",
        "api_version=3",
        "keypair",
        "KEY_ALIAS=x",
        "ABC=\nDEF=\n",
        "io.jsonwebtoken:jjwt",
        "com.example:api-core:jar:1.0",
        "x".repeat(3000).leak(),
    ]);
    let mut lists: Vec<&Allow> = rules.rules.iter().flat_map(|r| &r.allows).collect();
    lists.extend(&rules.global);
    let mut checked = 0;
    for list in lists {
        let Some(any) = &list.regexes else {
            continue;
        };
        assert!(!any.whole.is_empty() || any.rest.is_some());
        for t in &targets {
            assert_eq!(
                any.is_match(t.as_bytes()),
                any.all.is_match(t.as_bytes()),
                "{t:?} against {}",
                any.all.as_str()
            );
            checked += 1;
        }
    }
    assert!(checked > 10_000, "{checked} checks");
}
