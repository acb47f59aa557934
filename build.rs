fn main() {
    // napi-derive appends the TypeScript definitions of each #[napi] item to a file in this
    // folder (set in .cargo/config.toml) and cannot create the folder itself.
    if let Some(dir) = std::env::var_os("NAPI_TYPE_DEF_TMP_FOLDER") {
        std::fs::create_dir_all(dir).expect("cannot create NAPI_TYPE_DEF_TMP_FOLDER");
    }
    napi_build::setup();
}
