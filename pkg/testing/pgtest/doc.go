// Package pgtest is the hermetic PostgreSQL harness of mcpd's database tests.
//
// A test binary wraps its tests with Run (func TestMain(m *testing.M) {
// os.Exit(pgtest.Run(m)) }) and asks NewDB for a database of its own: a
// clone (CREATE DATABASE ... TEMPLATE) of a template database that was
// migrated once, on a PostgreSQL cluster that the binary starts on first use
// (initdb into a temporary directory, a random loopback port) and stops when
// the tests end. With MCPD_TEST_DATABASE_URL set to a superuser URL, the
// databases are made on that server instead; with MCPD_TEST_ENGINE=citus,
// on the shared Citus cluster (a coordinator and two workers).
//
// Each database comes with two pools: Admin, the superuser that owns it, and
// App, a login role that holds only cyberos_app, as mcpd's own role does in
// production. A case that needs no commit and one connection runs instead in
// a transaction that is rolled back (AppTx, AdminTx), on one database that
// all such cases share. Tests that stop and start the server get a private Cluster;
// a private cluster can have a streaming standby (StartStandby, Promote,
// Crash) for failover tests, and any cluster a pgbouncer in transaction
// mode in front of it (StartPgBouncer) for pooler tests. StartCluster
// starts one outside a test, with options (durable settings, a directory on
// disk, extra server settings): the benchmark harness runs its PostgreSQL
// so.
//
// A watchdog process stops every cluster and removes its directory when the
// test binary dies without cleaning up (a panic, a timeout, a kill).
package pgtest
