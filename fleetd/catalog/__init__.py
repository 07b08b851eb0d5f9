"""Model health: the provider catalog probe, as a port with an HTTP adapter (Model health).

* :mod:`~fleetd.catalog.port` — :class:`ModelCatalog`, one ``GET {baseUrl}/models`` per call,
  answered with a :class:`~fleetd.resilience.CatalogFetch` value, never an exception;
* :mod:`~fleetd.catalog.http` — :class:`HttpModelCatalog`, the httpx adapter;
* :mod:`~fleetd.catalog.fake` — :class:`FakeModelCatalog`, scripted answers for tests;
* :mod:`~fleetd.catalog.tracker` — :class:`ModelHealth`: which provider is due, the fail-open
  verdicts, the benches ``fleet_spawn`` honours, and each profile's context window.

The policy (schedule floor, verdict, bench, catalog reading) is pure and lives in
:mod:`fleetd.resilience`; this package only fetches, keeps state and reports.
"""
