//! Catalogue load and query times: `cargo bench -p carpentry-core --bench catalogue`.

use std::hint::black_box;

use carpentry_core::api::ec2nodeclass::EC2NodeClassSpec;
use carpentry_core::catalogue::Catalogue;
use criterion::{criterion_group, criterion_main, Criterion};

const JSON: &str = include_str!("../data/ec2-catalogue.json");

fn load(c: &mut Criterion) {
    c.bench_function("catalogue/from_json", |b| b.iter(|| Catalogue::from_json(black_box(JSON)).unwrap()));
}

fn instance_types(c: &mut Criterion) {
    let catalogue = Catalogue::embedded();
    let spec = EC2NodeClassSpec::default();
    c.bench_function("catalogue/instance_types(us-east-1, default)", |b| {
        b.iter(|| catalogue.instance_types(black_box("us-east-1"), black_box(&spec)).unwrap())
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = load, instance_types
}
criterion_main!(benches);
