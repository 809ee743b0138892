//! Names the build's commit for `fake-wireserver --version` (`wirecheck-build-stamp`).

fn main() {
    wirecheck_build_stamp::emit();
}
