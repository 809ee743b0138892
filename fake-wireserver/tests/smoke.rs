//! The handle starts real listeners that serve the default documents.

use fake_wireserver::{EndpointId, Fake, FakeConfig, Listener};

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
        .get(format!(
            "{}/metadata/instance/compute/vmSize?api-version=2017-08-01&format=text",
            fake.imds_url()
        ))
        .header("Metadata", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(md.status(), 200);
    assert_eq!(md.text().await.unwrap(), "Standard_D2s_v3");
    let j = fake.journal();
    assert_eq!(j.len(), 2);
    assert_eq!(j[0].endpoint, EndpointId::WireserverGoalstate);
    assert_eq!(j[1].endpoint, EndpointId::ImdsInstance);
    assert_eq!(j[1].answer.status, Some(200));
}

#[tokio::test]
async fn proxy_routes_by_authority_or_host() {
    let fake = Fake::start(FakeConfig::default().with_proxy())
        .await
        .unwrap();
    let proxy = reqwest::Client::builder()
        .proxy(reqwest::Proxy::http(format!("http://{}", fake.proxy_addr().unwrap())).unwrap())
        .build()
        .unwrap();
    // reqwest sends absolute-form targets to an HTTP proxy, as agents do with http_proxy set.
    let r = proxy
        .get("http://168.63.129.16:80/machine?comp=goalstate")
        .header("x-ms-version", "2012-11-30")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(
        r.text()
            .await
            .unwrap()
            .contains("http://168.63.129.16:80/machine/")
    );
    let r = proxy
        .get("http://169.254.169.254/metadata/instance/compute/vmId?api-version=2021-01-01&format=text")
        .header("Metadata", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Origin-form with a Host header is routed the same way.
    let direct = reqwest::Client::new();
    let r = direct
        .get(format!(
            "http://{}/metadata/versions",
            fake.proxy_addr().unwrap()
        ))
        .header("Host", "169.254.169.254")
        .header("Metadata", "true")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = proxy.get("http://10.0.0.1/").send().await.unwrap();
    assert_eq!(r.status(), 502);
    let j = fake.journal();
    let endpoints: Vec<EndpointId> = j.iter().map(|e| e.endpoint).collect();
    assert_eq!(
        endpoints,
        [
            EndpointId::WireserverGoalstate,
            EndpointId::ImdsInstance,
            EndpointId::ImdsVersions,
            EndpointId::ProxyUnknownHost
        ]
    );
    assert!(j.iter().all(|e| e.listener == Listener::Proxy));
    assert!(
        j[0].target.starts_with("http://168.63.129.16/"),
        "absolute-form: {}",
        j[0].target
    );
    assert!(
        j[0].findings.iter().any(|f| f.id == "path.spelling"),
        "no-slash goal state noted"
    );
    assert!(j[3].findings.iter().any(|f| f.id == "proxy.unknown-host"));
}

/// An agent that asks for the close (HTTP/1.1 `Connection: close`, or HTTP/1.0 without
/// keep-alive) gets `Connection: close` and then the end of the connection, not a connection
/// left open for it to time out on.
#[tokio::test]
async fn a_request_that_asks_for_the_close_gets_it() {
    use wirecheck_test_support::http::exchange_to_close;
    let fake = Fake::start(FakeConfig::default()).await.unwrap();
    let ws = fake.wireserver_addr().unwrap();
    for request in [
        "GET /?comp=versions HTTP/1.1\r\nHost: 168.63.129.16\r\nConnection: close\r\n\r\n",
        "GET /?comp=versions HTTP/1.0\r\nHost: 168.63.129.16\r\n\r\n",
    ] {
        let r = exchange_to_close(ws, request.as_bytes(), std::time::Duration::from_secs(10)).await;
        assert_eq!(r.status, 200, "{request:?}");
        assert_eq!(r.header("connection"), Some("close"), "{request:?}");
    }
}

/// Issue 23, "`Http://` served as the wireserver in proxy mode": an absolute-form target whose
/// scheme is spelled in another case names its host like any other (RFC 3986 §3.1). One for
/// another host is that host's (502, `proxy.unknown-host`), never the wireserver's because the
/// Host header says so; one for the wireserver is served as such.
#[tokio::test]
async fn an_http_scheme_in_another_case_is_routed_by_its_host_not_the_host_header() {
    use std::time::Duration;
    use wirecheck_test_support::http::exchange_to_close;
    let fake = Fake::start(FakeConfig::default().with_proxy())
        .await
        .unwrap();
    let proxy = fake.proxy_addr().unwrap();
    let foreign = b"GET Http://10.0.0.1/machine/?comp=goalstate HTTP/1.1\r\n\
        Host: 168.63.129.16\r\nx-ms-version: 2012-11-30\r\nConnection: close\r\n\r\n";
    let r = exchange_to_close(proxy, foreign, Duration::from_secs(10)).await;
    assert_eq!(r.status, 502, "{}", r.raw_text());
    let wireserver = b"GET hTTp://168.63.129.16/machine/?comp=goalstate HTTP/1.1\r\n\
        Host: 168.63.129.16\r\nx-ms-version: 2012-11-30\r\nConnection: close\r\n\r\n";
    let r = exchange_to_close(proxy, wireserver, Duration::from_secs(10)).await;
    assert_eq!(r.status, 200, "{}", r.raw_text());
    assert!(r.text().contains("<Incarnation>"), "{}", r.raw_text());
    let endpoints: Vec<EndpointId> = fake.journal().iter().map(|e| e.endpoint).collect();
    assert_eq!(
        endpoints,
        [
            EndpointId::ProxyUnknownHost,
            EndpointId::WireserverGoalstate
        ]
    );
}
