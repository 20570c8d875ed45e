//! A private PostgreSQL cluster: `initdb` into a temporary directory, `pg_ctl start` listening
//! only on a Unix socket in that directory (no TCP), stopped and removed when the guard drops.
//! Never touches a system instance. As root, `initdb` refuses to run, so the server runs as the
//! `postgres` user (Debian's package creates it) or `nobody`, through `runuser`.

use crate::RequestsError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The superuser name of the private cluster.
pub const SUPERUSER: &str = "counterpoint";
/// The port number only names the socket file (`.s.PGSQL.PORT`): no TCP listener is opened.
pub const PORT: u16 = 5432;

/// Server settings of the harness, and why:
/// - `listen_addresses=''`: Unix socket only, in the private directory.
/// - `max_parallel_workers_per_gather=0`: a query runs in its backend alone, so the backend's
///   counters hold all of its work (parallel workers are other processes).
/// - `jit=off`: JIT compilation time would land in whichever request triggered it.
/// - `fsync=off`, `synchronous_commit=off`: the data is regenerated on every run.
/// - `statement_timeout=600s`: a statement that runs away ends the run with an error, never a
///   hang.
pub const SERVER_OPTIONS: &str = "-c listen_addresses='' -c max_parallel_workers_per_gather=0 \
     -c jit=off -c fsync=off -c synchronous_commit=off -c shared_buffers=64MB -c work_mem=16MB \
     -c statement_timeout=600s";

/// Where the PostgreSQL programs are: `$COUNTERPOINT_PG_BIN`, else the newest
/// `/usr/lib/postgresql/N/bin` (Debian's layout), else the directory of `pg_ctl` on `PATH`.
pub fn find_bin() -> Result<PathBuf, RequestsError> {
    let has_all = |d: &Path| {
        ["initdb", "pg_ctl", "postgres"]
            .iter()
            .all(|p| d.join(p).is_file())
    };
    if let Some(d) = std::env::var_os("COUNTERPOINT_PG_BIN") {
        let d = PathBuf::from(d);
        return if has_all(&d) {
            Ok(d)
        } else {
            Err(RequestsError::NoPostgres(format!(
                "COUNTERPOINT_PG_BIN={} lacks initdb, pg_ctl or postgres",
                d.display()
            )))
        };
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            Some((v, e.path().join("bin")))
        })
        .filter(|(_, d)| has_all(d))
        .collect();
    versions.sort();
    if let Some((_, d)) = versions.pop() {
        return Ok(d);
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        if has_all(&dir) {
            return Ok(dir);
        }
    }
    Err(RequestsError::NoPostgres(
        "no initdb/pg_ctl/postgres in /usr/lib/postgresql/*/bin or on PATH (install Debian's \
         `postgresql` package: scripts/setup, part scripts/setup.d/postgresql.sh)"
            .into(),
    ))
}

/// A running private cluster; stopped (immediate shutdown) and deleted on drop.
pub struct PgCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    run_as: Option<String>,
    version: String,
}

impl PgCluster {
    /// `initdb` and start a cluster in a new temporary directory.
    pub fn start() -> Result<PgCluster, RequestsError> {
        let bin = find_bin()?;
        let dir = tempfile::Builder::new()
            .prefix("counterpoint-pg-")
            .tempdir()
            .map_err(|e| RequestsError::Io("creating the cluster directory".into(), e))?;
        // SAFETY: geteuid has no preconditions.
        let run_as = if unsafe { libc::geteuid() } == 0 {
            let name = ["postgres", "nobody"]
                .into_iter()
                .find(|n| nix::unistd::User::from_name(n).ok().flatten().is_some())
                .ok_or_else(|| {
                    RequestsError::NoPostgres(
                        "running as root and neither user postgres nor nobody exists (initdb \
                         refuses root)"
                            .into(),
                    )
                })?;
            let user = nix::unistd::User::from_name(name)
                .ok()
                .flatten()
                .ok_or_else(|| RequestsError::NoPostgres(format!("user {name} vanished")))?;
            nix::unistd::chown(dir.path(), Some(user.uid), Some(user.gid)).map_err(|e| {
                RequestsError::Io(
                    format!("chown {} to {name}", dir.path().display()),
                    std::io::Error::from(e),
                )
            })?;
            Some(name.to_string())
        } else {
            None
        };
        let mut c = PgCluster {
            version: String::new(),
            dir,
            bin,
            run_as,
        };
        let data = c.data_dir();
        c.run(
            "initdb",
            &[
                "-D",
                path_str(&data)?,
                "-U",
                SUPERUSER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--locale=C",
            ],
        )?;
        let sock = path_str(c.dir.path())?.to_string();
        let log = c.log_path();
        let opts = format!("{SERVER_OPTIONS} -k {sock} -p {PORT}");
        c.run(
            "pg_ctl",
            &[
                "-D",
                path_str(&data)?,
                "-l",
                path_str(&log)?,
                "-w",
                "-t",
                "60",
                "-o",
                &opts,
                "start",
            ],
        )?;
        c.version = std::fs::read_to_string(data.join("PG_VERSION"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        Ok(c)
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    /// The server's major version (`PG_VERSION`).
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The socket directory.
    pub fn socket_dir(&self) -> &Path {
        self.dir.path()
    }

    /// A new connection to database `postgres` as the superuser, over the Unix socket.
    pub fn connect(&self) -> Result<postgres::Client, RequestsError> {
        postgres::Config::new()
            .host_path(self.dir.path())
            .port(PORT)
            .user(SUPERUSER)
            .dbname("postgres")
            .connect(postgres::NoTls)
            .map_err(|e| RequestsError::Pg("connecting to the private cluster".into(), e))
    }

    fn run(&self, prog: &str, args: &[&str]) -> Result<(), RequestsError> {
        let exe = self.bin.join(prog);
        let mut cmd = match &self.run_as {
            Some(u) => {
                let mut c = Command::new("runuser");
                c.arg("-u").arg(u).arg("--").arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        // A process group of its own: a Ctrl-C at a terminal goes to the whole foreground group,
        // and initdb, pg_ctl and the server they start must not die of it before this process
        // stops them in order (or a `pg_ctl stop` in the Drop guard dies of a second one).
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        cmd.args(args).current_dir(self.dir.path());
        let out = cmd
            .output()
            .map_err(|e| RequestsError::Io(format!("running {}", exe.display()), e))?;
        if !out.status.success() {
            let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            return Err(RequestsError::NoPostgres(format!(
                "{prog} failed ({}): {} {}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim(),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; server log: {}",
                        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                    )
                }
            )));
        }
        Ok(())
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let data = self.data_dir();
        let Some(d) = data.to_str() else { return };
        if data.join("postmaster.pid").exists() {
            // Immediate: the data is thrown away with the directory anyway.
            let _ = self.run(
                "pg_ctl",
                &["-D", d, "-m", "immediate", "-w", "-t", "30", "stop"],
            );
        }
    }
}

fn path_str(p: &Path) -> Result<&str, RequestsError> {
    p.to_str()
        .ok_or_else(|| RequestsError::NoPostgres(format!("path {} is not UTF-8", p.display())))
}
