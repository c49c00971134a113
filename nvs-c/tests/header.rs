//! include/nvs.h is what cbindgen makes of this crate today (`NVS_BLESS=1` rewrites it).

#[test]
fn header_is_fresh() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let config = cbindgen::Config::from_file(format!("{dir}/cbindgen.toml")).expect("cbindgen.toml");
    let mut made = Vec::new();
    cbindgen::Builder::new()
        .with_crate(dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut made);
    let path = format!("{dir}/include/nvs.h");
    if std::env::var_os("NVS_BLESS").is_some() {
        std::fs::write(&path, &made).expect("write include/nvs.h");
        return;
    }
    let have = std::fs::read(&path).unwrap_or_default();
    assert!(have == made, "include/nvs.h is stale: run `NVS_BLESS=1 cargo test -p nvs-c --test header` and commit it");
}

/// The Fortran module's status and mode constants are nvs.h's (same name, same value).
#[test]
fn fortran_constants_match_the_header() {
    let dir = env!("CARGO_MANIFEST_DIR");
    let h = std::fs::read_to_string(format!("{dir}/include/nvs.h")).expect("nvs.h");
    let f = std::fs::read_to_string(format!("{dir}/include/nvs.f90")).expect("nvs.f90");
    let defines: std::collections::HashMap<&str, &str> =
        h.lines().filter_map(|l| l.strip_prefix("#define ")).filter_map(|l| l.split_once(' ')).collect();
    let mut checked = 0;
    for tok in f.split([',', '\n', ':', '&']) {
        let Some((name, value)) = tok.split_once('=') else { continue };
        let (name, value) = (name.trim(), value.trim());
        if !name.starts_with("NVS_") || value.parse::<i64>().is_err() {
            continue;
        }
        let c_name = if name == "NVS_VERSION_LATEST" { "NVS_LATEST" } else { name };
        assert_eq!(defines.get(c_name).copied(), Some(value), "{name} in nvs.f90 is {value}, nvs.h says otherwise");
        checked += 1;
    }
    // Every status, the two open modes and the latest version.
    assert_eq!(checked, 14 + 2 + 1, "constants found in nvs.f90");
}
