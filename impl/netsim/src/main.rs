//! `udt-sim`: runs one simulated scenario run (a JSON [`RunSpec`]) and prints its result as
//! JSON (docs/simulator.md).
//!
//! ```text
//! udt-sim SPEC.json|- [--out RESULT.json]
//! ```
//!
//! On stderr: the simulated time, the wall time and their ratio. Exit 2 on a bad spec, with
//! what is wrong.

use std::io::Read;
use std::process::ExitCode;
use std::time::Instant as WallClock;

use netsim::scenario::{run, RunSpec};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: udt-sim SPEC.json|- [--out RESULT.json]  (a run spec: docs/simulator.md)";
    let (path, out) = match args.as_slice() {
        [p] => (p.clone(), None),
        [p, flag, o] if flag == "--out" => (p.clone(), Some(o.clone())),
        _ => {
            eprintln!("{usage}");
            return ExitCode::from(2);
        }
    };
    let text = if path == "-" {
        let mut s = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut s) {
            eprintln!("udt-sim: cannot read the spec from stdin: {e}");
            return ExitCode::from(2);
        }
        s
    } else {
        match std::fs::read_to_string(&path) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("udt-sim: cannot read {path}: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let spec: RunSpec = match serde_json::from_str(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("udt-sim: {path} is not a run spec: {e} (docs/simulator.md lists the fields)");
            return ExitCode::from(2);
        }
    };
    let wall = WallClock::now();
    let result = match run(&spec) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("udt-sim: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    let wall_s = wall.elapsed().as_secs_f64();
    let mut json = serde_json::to_value(&result).expect("results serialise");
    json["wall_s"] = serde_json::json!(wall_s);
    json["speed"] = serde_json::json!(spec.duration_s / wall_s.max(1e-9));
    let text = serde_json::to_string(&json).expect("results serialise");
    eprintln!(
        "udt-sim: {:.1} s simulated in {:.2} s wall ({:.1}× real time, {} events)",
        spec.duration_s,
        wall_s,
        spec.duration_s / wall_s.max(1e-9),
        result.events
    );
    match out {
        Some(o) => {
            if let Err(e) = std::fs::write(&o, text + "\n") {
                eprintln!("udt-sim: cannot write {o}: {e}");
                return ExitCode::from(1);
            }
        }
        None => println!("{text}"),
    }
    ExitCode::SUCCESS
}
