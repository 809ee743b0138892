//! Names the build's commit for `provision-report --version` (`wirecheck-build-stamp`).

fn main() {
    wirecheck_build_stamp::emit();
}
