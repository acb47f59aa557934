mod native_bin;
