//! carpentry-controller: the live adapter. The provisioning loop arrives with its own issue; for
//! now the binary only reports what it would serve, so the workspace layout is complete.

fn main() {
    let catalogue = carpentry_core::catalogue::Catalogue::embedded();
    eprintln!(
        "carpentry-controller: not yet implemented; the embedded catalogue holds {} instance types in {} regions",
        catalogue.instance_type_count(),
        catalogue.regions().count()
    );
    std::process::exit(2);
}
