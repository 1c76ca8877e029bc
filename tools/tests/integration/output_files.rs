//! `-o` writes files the way Unix tools do: a new file gets the mode the
//! umask leaves of 0666, an overwritten file keeps its mode, a symbolic
//! link is written through, a failed write names the destination and exits
//! non-zero, and no temporary file is left behind.
#![cfg(unix)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

const OPT: &str = env!("CARGO_BIN_EXE_apir-opt");

fn example() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/relu-kernel.apir")
        .display()
        .to_string()
}

fn mode(p: &Path) -> u32 {
    fs::metadata(p).unwrap().permissions().mode() & 0o777
}

fn leftovers(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".apir-out-"))
        .collect()
}

#[test]
fn new_files_follow_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    for (umask, want) in [("022", 0o644), ("077", 0o600), ("002", 0o664)] {
        let out = dir.path().join(format!("u{umask}.apir"));
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask}; exec \"$0\" \"$1\" -o \"$2\""))
            .arg(OPT)
            .arg(example())
            .arg(&out)
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(mode(&out), want, "umask {umask}");
    }
}

#[test]
fn an_overwritten_file_keeps_its_mode_and_a_link_stays_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kept.apir");
    fs::write(&file, "old").unwrap();
    fs::set_permissions(&file, fs::Permissions::from_mode(0o604)).unwrap();
    let ok = Command::new(OPT)
        .arg(example())
        .arg("-o")
        .arg(&file)
        .status()
        .unwrap();
    assert!(ok.success());
    assert_eq!(mode(&file), 0o604);
    assert!(fs::read_to_string(&file)
        .unwrap()
        .starts_with("module @relu"));

    let target = dir.path().join("target.apir");
    fs::write(&target, "old").unwrap();
    let link = dir.path().join("link.apir");
    std::os::unix::fs::symlink("target.apir", &link).unwrap();
    let ok = Command::new(OPT)
        .arg(example())
        .arg("-o")
        .arg(&link)
        .status()
        .unwrap();
    assert!(ok.success());
    assert!(fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(fs::read_to_string(&target)
        .unwrap()
        .starts_with("module @relu"));
    assert!(leftovers(dir.path()).is_empty());
}

#[test]
fn a_failed_write_names_the_destination_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should go: the rename fails.
    let taken = dir.path().join("taken");
    fs::create_dir(&taken).unwrap();
    let out = Command::new(OPT)
        .arg(example())
        .arg("-o")
        .arg(&taken)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot write `{}`", taken.display())),
        "{err}"
    );
    assert!(!err.contains(".apir-out-"), "{err}");
    assert!(leftovers(dir.path()).is_empty());
    // A full device.
    if Path::new("/dev/full").exists() {
        let out = Command::new(OPT)
            .arg(example())
            .arg("-o")
            .arg("/dev/full")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write `/dev/full`"));
        let out = Command::new("sh")
            .arg("-c")
            .arg("exec \"$0\" \"$1\" > /dev/full")
            .arg(OPT)
            .arg(example())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write standard output"));
    }
}

/// A directory given to `-o` is said to be one however it is named (`out`,
/// `out/`, `out/.`, a link to it), by `apir-opt` and `apir-gen` alike,
/// where renaming over `out/` said `Not a directory` and over `out/.`
/// `Device or resource busy`; exit 1, and nothing is written.
#[test]
fn a_directory_as_the_output_is_said_to_be_one() {
    let dir = tempfile::tempdir().unwrap();
    let taken = dir.path().join("taken");
    fs::create_dir(&taken).unwrap();
    std::os::unix::fs::symlink("taken", dir.path().join("link")).unwrap();
    let gen = env!("CARGO_BIN_EXE_apir-gen");
    for dest in [
        "taken", "taken/", "taken/.", "taken//", "link", "link/", ".",
    ] {
        let run = |cmd: &mut Command| {
            let out = cmd.current_dir(dir.path()).output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            assert_eq!(out.status.code(), Some(1), "{dest}: {err}");
            assert_eq!(
                err,
                format!("error: cannot write `{dest}`: it is a directory\n"),
                "{dest}"
            );
        };
        run(Command::new(OPT).arg(example()).arg("-o").arg(dest));
        run(Command::new(gen).args(["--ops", "3", "-o", dest]));
    }
    assert_eq!(fs::read_dir(&taken).unwrap().count(), 0);
    assert!(leftovers(dir.path()).is_empty());
}

/// `/dev/null` as standard output is written and exits 0 however it was
/// opened: write-only (a shell's `> /dev/null`) or read-write (Python's
/// `subprocess.DEVNULL`, and what the Rust runtime opens on a standard
/// output that was closed when the tool started).
#[test]
fn dev_null_as_stdout_is_written_however_it_was_opened() {
    let tools = [
        format!("{OPT} {}", example()),
        format!(
            "{} --kind SDMA --hex ff0f00c0000008000000004000000000",
            env!("CARGO_BIN_EXE_apir-dis")
        ),
        format!("{} --ops 10", env!("CARGO_BIN_EXE_apir-gen")),
    ];
    for cmd in &tools {
        for redirect in ["> /dev/null", "1<> /dev/null"] {
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{cmd} {redirect}"))
                .output()
                .unwrap();
            assert_eq!(
                out.status.code(),
                Some(0),
                "{cmd} {redirect}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.stderr.is_empty(), "{cmd} {redirect}");
        }
    }
}

/// A run stopped by SIGINT, SIGTERM or SIGHUP while it writes `-o` (its
/// input still arriving on stdin) removes its temporary file, leaves the
/// destination as it was, and ends by that signal.
#[test]
fn a_signal_during_the_write_leaves_nothing() {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(example()).unwrap();
    // Everything but the module's closing brace: the run waits for more.
    let open = &text[..text.rfind('}').unwrap()];
    for (name, sig) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let dest = dir.path().join("out.apir");
        fs::write(&dest, "before\n").unwrap();
        let mut child = Command::new(OPT)
            .args(["-", "-o"])
            .arg(&dest)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(open.as_bytes()).unwrap();
        stdin.flush().unwrap();
        // The temporary file exists once the run has started writing.
        let mut waited = 0;
        while leftovers(dir.path()).is_empty() {
            assert!(waited < 1000, "SIG{name}: no temporary file appeared");
            std::thread::sleep(std::time::Duration::from_millis(10));
            waited += 1;
        }
        let killed = Command::new("kill")
            .args([format!("-{name}"), child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let out = child.wait_with_output().unwrap();
        drop(stdin);
        assert_eq!(
            out.status.signal(),
            Some(sig),
            "SIG{name}: {:?}",
            out.status
        );
        assert_eq!(leftovers(dir.path()), Vec::<String>::new(), "SIG{name}");
        assert_eq!(fs::read_to_string(&dest).unwrap(), "before\n", "SIG{name}");
    }
}
