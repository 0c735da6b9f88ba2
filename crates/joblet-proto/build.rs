//! Generates the tonic/prost code for `proto/joblet.proto`.
//!
//! `protoc` comes from the `protoc-bin-vendored` crate (a binary shipped in a
//! crates.io package), so a fresh machine needs no system protobuf compiler.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    std::env::set_var("PROTOC", protoc);
    println!("cargo:rerun-if-changed=proto/joblet.proto");
    tonic_prost_build::configure().compile_protos(&["proto/joblet.proto"], &["proto"])?;
    Ok(())
}
