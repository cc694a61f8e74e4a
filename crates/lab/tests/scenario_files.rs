//! Every file in `scenarios/` runs (each value of its sweep, at the file's seed and at seeds 1 to
//! 3) with the lab's engine apps; every engine app completes the handshakes it planned and none
//! fails, every `[[expect]]` of the file holds, and a run repeated gives the same report.

use fastshake_lab::apps::scenario::{engine_apps, KINDS};
use fastshake_sim::scenario::ScenarioFile;
use std::path::PathBuf;

fn scenario_files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_scenario_completes_its_handshakes_and_meets_its_expectations() {
    let mut engine_files = 0;
    let mut kinds_seen = std::collections::BTreeSet::new();
    for path in scenario_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let file = ScenarioFile::parse(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let base = file.base().unwrap();
        let engine_kinds: Vec<&str> =
            base.apps.iter().map(|a| a.kind.as_str()).filter(|k| KINDS.contains(k)).collect();
        if !engine_kinds.is_empty() {
            engine_files += 1;
            assert!(!base.expects.is_empty(), "{name}: a file with engine apps says what it expects");
        }
        kinds_seen.extend(engine_kinds.iter().map(|k| k.to_string()));
        for ((label, scenario), seed) in file
            .runs()
            .unwrap()
            .into_iter()
            .flat_map(|run| [None, Some(1), Some(2), Some(3)].map(|seed| (run.clone(), seed)))
        {
            let run = format!("{name} {} seed {seed:?}", label.as_deref().unwrap_or(""));
            let go = || {
                let out = scenario.run_with(seed, false, label.clone(), &mut engine_apps);
                out.unwrap_or_else(|e| panic!("{run}: {e}")).report
            };
            let report = go();
            let again = go();
            let json = |r| serde_json::to_string(r).unwrap();
            assert_eq!(json(&report), json(&again), "{run}: reproducible from its seed");
            for app in &report.apps {
                let Some(hs) = &app.handshakes else { continue };
                assert_eq!(hs.failed, 0, "{run}: {} had handshakes fail: {hs:?}", app.name);
                assert_eq!(hs.sessions_failed, 0, "{run}: {} had sessions fail: {hs:?}", app.name);
                assert!(hs.completed > 0, "{run}: {} completed no handshake", app.name);
                if let Some(planned) = hs.planned {
                    assert_eq!(hs.completed, planned, "{run}: {} completed its plan", app.name);
                }
            }
            let expectations = report.expectations.unwrap_or_default();
            assert!(expectations.unmet.is_empty(), "{run}: {:?}", expectations.unmet);
        }
    }
    assert!(engine_files >= 5, "the engine scenarios are there ({engine_files})");
    assert_eq!(kinds_seen.len(), KINDS.len(), "every engine kind runs in some file: {kinds_seen:?}");
}
