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
    assert!(
        have == made,
        "include/nvs.h is stale: run `NVS_BLESS=1 cargo test -p nvs-c --test header` and commit it"
    );
}
