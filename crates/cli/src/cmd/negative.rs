//! Negative values given to options that take none: clap's whole-number parsers read `-5` as
//! an unsigned number and say only "invalid digit found in string" (`top --rows -5`), which
//! names the option but not what it takes. The error is rewritten with the option's own range,
//! asked of its parser; and a negative duration after a duration option (`--interval -1s`) is
//! joined to it (`--interval=-1s`), so that the duration's parser refuses it, not clap as an
//! unknown flag `-1`.

use clap::error::{ContextKind, ContextValue, ErrorKind};
use std::ffi::OsString;

/// Options whose value is a duration (`1s`, `250ms`).
const DURATION_OPTIONS: &[&str] = &["--interval", "--min-wait", "--min-hold"];

/// Every subcommand, nested ones too: a negative number after an option is its value
/// (`burn --seconds -1`, `bench sim --repeat -1`).
pub fn negative_values_as_values(c: clap::Command) -> clap::Command {
    c.mut_subcommands(|s| negative_values_as_values(s.allow_negative_numbers(true)))
}

/// `argv` with a negative duration joined to the duration option before it (`--interval -1s`
/// becomes `--interval=-1s`), up to a `--`. Only a word that starts with `-` and a digit or a
/// point is joined: a flag or `--` after the option stays what it is, and clap still says the
/// option's value is missing (letting the options take any hyphen value made `--min-wait --
/// true` read `--` as the duration; review, session 30).
pub fn attach_negative_durations(argv: Vec<OsString>) -> Vec<OsString> {
    let mut out = Vec::with_capacity(argv.len());
    let mut it = argv.into_iter().peekable();
    while let Some(word) = it.next() {
        if word == "--" {
            out.push(word);
            out.extend(it);
            break;
        }
        let is_duration_option = word.to_str().is_some_and(|w| DURATION_OPTIONS.contains(&w));
        let negative_next = it.peek().and_then(|n| n.to_str()).is_some_and(|n| {
            n.strip_prefix('-')
                .and_then(|r| r.chars().next())
                .is_some_and(|c| c.is_ascii_digit() || c == '.')
        });
        if is_duration_option && negative_next {
            let mut joined = word;
            joined.push("=");
            joined.push(it.next().unwrap_or_default());
            out.push(joined);
        } else {
            out.push(word);
        }
    }
    out
}

/// `err` as it should read when it refuses a negative whole number: with the range the option
/// takes (`-5 is not in 1..=100000`), found by giving its parser `0` in the subcommand that
/// `argv` named. Any other error comes back unchanged.
pub fn explain_negative(err: clap::Error, root: &clap::Command, argv: &[OsString]) -> clap::Error {
    if err.kind() != ErrorKind::ValueValidation {
        return err;
    }
    let (Some(ContextValue::String(value)), Some(ContextValue::String(arg))) = (
        err.get(ContextKind::InvalidValue),
        err.get(ContextKind::InvalidArg),
    ) else {
        return err;
    };
    // Only an unsigned parser's refusal: other parsers (seconds, CPUs) say what they take.
    if !value.parse::<i128>().is_ok_and(|n| n < 0)
        || !err.to_string().contains("invalid digit found in string")
    {
        return err;
    }
    let Some(flag) = arg.split_whitespace().next().filter(|f| f.starts_with('-')) else {
        return err;
    };
    let sub = subcommand_of(root, argv);
    let reason = match sub.clone().try_get_matches_from([
        OsString::from(sub.get_name()),
        flag.into(),
        "0".into(),
    ]) {
        // The range's own words (`0 is not in 1..=100000`), said of the value given.
        Err(e) if e.kind() == ErrorKind::ValueValidation => {
            let text = e.to_string();
            let said = text
                .lines()
                .next()
                .and_then(|l| l.split_once("': "))
                .map(|(_, why)| why.trim().to_string());
            match said.as_deref().and_then(|w| w.strip_prefix("0 is not in ")) {
                Some(range) => format!("{value} is not in {range}"),
                None => format!("{value} is negative: a whole number is expected"),
            }
        }
        // 0 passes its parser (whatever else the probe lacks); whether the command takes 0 is
        // its own later check, so only the sign is said.
        _ => format!("{value} is negative: this option takes a whole number"),
    };
    let mut sub = sub.clone();
    sub.build();
    clap::Error::raw(
        ErrorKind::ValueValidation,
        format!("invalid value '{value}' for '{arg}': {reason}\n"),
    )
    .with_cmd(&sub)
}

/// The deepest subcommand `argv` (program name first) names, before any `--`.
fn subcommand_of<'a>(root: &'a clap::Command, argv: &[OsString]) -> &'a clap::Command {
    let mut cmd = root;
    for word in argv.iter().skip(1) {
        if word == "--" {
            break;
        }
        if let Some(sub) = cmd.find_subcommand(word) {
            cmd = sub;
        }
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{value_parser, Arg, Command};

    fn cli() -> Command {
        negative_values_as_values(
            Command::new("cp").subcommand(
                Command::new("top")
                    .arg(
                        Arg::new("rows")
                            .long("rows")
                            .value_parser(value_parser!(u64).range(1..=100_000)),
                    )
                    .arg(
                        Arg::new("count")
                            .long("count")
                            .value_parser(value_parser!(u64)),
                    )
                    .arg(Arg::new("interval").long("interval"))
                    .arg(Arg::new("policy").long("policy").required(true)),
            ),
        )
    }

    fn error_of(args: &[&str]) -> String {
        let root = cli();
        let argv: Vec<OsString> = args.iter().map(OsString::from).collect();
        match root.clone().try_get_matches_from(&argv) {
            Ok(_) => String::new(),
            Err(e) => explain_negative(e, &root, &argv).to_string(),
        }
    }

    #[test]
    fn a_negative_whole_number_is_refused_with_the_options_range() {
        let e = error_of(&["cp", "top", "--rows", "-5"]);
        assert!(
            e.contains("invalid value '-5' for '--rows <rows>': -5 is not in 1..=100000"),
            "{e}"
        );
        assert!(!e.contains("invalid digit"), "{e}");
        // An option whose parser takes 0 (and is not required: the probe lacks `--policy`).
        let e = error_of(&["cp", "top", "--count", "-1"]);
        assert!(
            e.contains("-1 is negative: this option takes a whole number"),
            "{e}"
        );
    }

    #[test]
    fn other_errors_and_durations_are_left_to_their_parsers() {
        // Not a number: clap's own message.
        let e = error_of(&["cp", "top", "--rows", "x", "--policy", "p"]);
        assert!(e.contains("invalid digit"), "{e}");
        // A negative duration is joined to its option; a flag or `--` after it is not.
        let argv = |v: &[&str]| -> Vec<OsString> { v.iter().map(OsString::from).collect() };
        assert_eq!(
            attach_negative_durations(argv(&["cp", "top", "--interval", "-1s", "--once"])),
            argv(&["cp", "top", "--interval=-1s", "--once"])
        );
        for kept in [
            &["cp", "top", "--interval", "--once"][..],
            &["cp", "lockprof", "--min-wait", "--", "true"],
            &["cp", "stat", "--", "prog", "--interval", "-1s"],
            &["cp", "top", "--rows", "-5"],
        ] {
            assert_eq!(
                attach_negative_durations(argv(kept)),
                argv(kept),
                "{kept:?}"
            );
        }
    }
}
