// The driver of `crates/host/tests/data/churn.py` (one command per line, one answer line
// each), shared by the host's tests/threads.rs and the broker's hostsource tests through
// `include!` (which is why this file has no inner doc comment).

/// The helper program, running.
struct Churn {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Churn {
    /// Start `script` (churn.py) and wait for `ready`: the helper and its CPU time at start;
    /// `None` (the test skips) without python3.
    fn start(script: &str) -> Option<(Churn, u64)> {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut child = Command::new("python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let stdin = child.stdin.take()?;
        let out = std::io::BufReader::new(child.stdout.take()?);
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut c = Churn {
            child,
            stdin,
            lines,
        };
        let cpu = c.answer("ready")[0];
        Some((c, cpu))
    }

    /// The helper's pid.
    #[allow(dead_code)]
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The numbers of the next line, which must start with `word`. Bounded at two minutes only
    /// so that a hung helper fails the test instead of hanging it.
    fn answer(&mut self, word: &str) -> Vec<u64> {
        let line = self
            .lines
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("no `{word}` line from the helper: {e}"));
        let mut it = line.split_whitespace();
        assert_eq!(it.next(), Some(word), "{line}");
        it.map(|n| n.parse().expect("number")).collect()
    }

    /// Send `cmd`, return the numbers of its answer.
    fn ask(&mut self, cmd: &str, word: &str) -> Vec<u64> {
        use std::io::Write;
        writeln!(self.stdin, "{cmd}").expect("command");
        self.answer(word)
    }
}

impl Drop for Churn {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
