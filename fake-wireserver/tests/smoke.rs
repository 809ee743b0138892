//! The handle starts real listeners that serve the default documents.

use fake_wireserver::{Fake, FakeConfig};

#[tokio::test]
async fn serves_default_documents_on_loopback() {
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let client = reqwest::Client::new();
    let gs = client
        .get(format!("{}/machine/?comp=goalstate", fake.wireserver_url()))
        .header("x-ms-version", "2012-11-30")
        .send()
        .await
        .unwrap();
    assert_eq!(gs.status(), 200);
    let text = gs.text().await.unwrap();
    assert!(text.contains("<Incarnation>1</Incarnation>"), "{text}");
    let md = client
        .get(format!("{}/metadata/instance/compute/vmSize?api-version=2017-08-01&format=text", fake.imds_url()))
        .header("Metadata", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(md.status(), 200);
    assert_eq!(md.text().await.unwrap(), "Standard_D2s_v3");
    let j = fake.journal();
    assert_eq!(j.len(), 2);
    assert_eq!(j[0].endpoint, "wireserver.goalstate");
    assert_eq!(j[1].endpoint, "imds.instance");
    assert_eq!(j[1].answer.status, Some(200));
}
