// The PostgreSQL JDBC driver against `dpsql serve` (tests/test_clients_jdbc.py): prints "name<TAB>value" lines.
// Arguments: the port, the URL's parameters (e.g. "?sslmode=require"), the large query.
import java.sql.*;
import java.util.*;

public class JdbcClient {
    static void show(String name, Object value) { System.out.println(name + "\t" + value); }

    static List<String> column(ResultSet rs, String label) throws SQLException {
        List<String> out = new ArrayList<>();
        while (rs.next()) out.add(rs.getString(label));
        return out;
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/census" + args[1];
        try (Connection c = DriverManager.getConnection(url, "alice", "alice-pw")) {
            // typed parameters, executed often enough that the driver switches to a named prepared statement
            try (PreparedStatement p = c.prepareStatement(
                    "SELECT sex, COUNT(*) AS n FROM people WHERE age > ? GROUP BY sex ORDER BY sex")) {
                p.setInt(1, 25);
                for (int i = 0; i < 6; i++) p.executeQuery().close();
                show("typed", column(p.executeQuery(), "sex"));
            }
            try (PreparedStatement p = c.prepareStatement("SELECT COUNT(*) AS n FROM people WHERE sex = ?")) {
                p.setString(1, "F");
                ResultSet rs = p.executeQuery(); rs.next();
                show("string", rs.getDouble("n") > 0);
            }
            try (PreparedStatement p = c.prepareStatement("SELECT COUNT(*) FROM people WHERE sex = ?")) {
                p.setString(1, "M");
                ResultSet rs = p.executeQuery(); rs.next();
                show("named", rs.getMetaData().getColumnName(1));
            }
            try (PreparedStatement p = c.prepareStatement("SELECT ? * 2 AS x, CAST(? AS DATE) + 1 AS d, ? AS b")) {
                p.setDouble(1, 1.5); p.setBoolean(3, true);  // the driver sends a date untyped: cast here
                p.setDate(2, java.sql.Date.valueOf("2024-01-31"));
                ResultSet rs = p.executeQuery(); rs.next();
                show("values", rs.getDouble("x") + "," + rs.getDate("d") + "," + rs.getBoolean("b"));
            }
            try (PreparedStatement p = c.prepareStatement("SELECT COUNT(*) AS n FROM people WHERE age > ?::int")) {
                p.setObject(1, "25", Types.OTHER);  // untyped text, as with stringtype=unspecified
                ResultSet rs = p.executeQuery(); rs.next();
                show("untyped", rs.getDouble("n") > 0);
            }
            try (Statement s = c.createStatement()) {
                s.execute("CREATE TABLE notes (a INTEGER CHECK (a > 0))");
            }
            try (PreparedStatement p = c.prepareStatement("INSERT INTO notes VALUES (?)")) {
                for (int a : new int[] {1, -1, 3}) { p.setInt(1, a); p.addBatch(); }
                p.executeBatch();
                show("batch", "no error");
            } catch (BatchUpdateException e) {
                show("batch", "refused");
            }
            try (Statement s = c.createStatement()) {
                try { s.executeQuery("SELECT nosuch FROM people"); } catch (SQLException e) { show("error", e.getSQLState()); }
                ResultSet rs = s.executeQuery("SELECT 1 AS one"); rs.next();
                show("after_error", rs.getInt(1));
                s.execute("SET dpsql.stderr = on");
                rs = s.executeQuery("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY sex");
                ResultSetMetaData m = rs.getMetaData();
                show("stderr_columns", m.getColumnCount() + ":" + m.getColumnName(3));
                s.setQueryTimeout(1);  // the driver sends a cancel request when it passes
                try { s.executeQuery("SELECT COUNT(*) FROM range(1000000000000) a"); } catch (SQLException e) { show("cancel", e.getSQLState()); }
                s.setQueryTimeout(0);
                rs = s.executeQuery("SHOW dpsql.budget");
                rs.next();
                show("budget", rs.getString("budget") + "=" + rs.getDouble("epsilon"));
            }
            c.setAutoCommit(false);  // with a fetch size, the driver reads the rows in portions (a suspended portal)
            try (Statement s = c.createStatement()) {
                s.setFetchSize(5000);
                ResultSet rs = s.executeQuery(args[2]);
                int count = 0; String first = null, last = null;
                while (rs.next()) {
                    last = rs.getInt(1) + ":" + rs.getString(2);
                    if (count++ == 0) first = last;
                }
                show("large", count + " " + first + " " + last);
            }
            c.commit();
            c.setAutoCommit(true);
            DatabaseMetaData md = c.getMetaData();
            show("catalogs", column(md.getCatalogs(), "TABLE_CAT"));
            show("schemas", column(md.getSchemas(), "TABLE_SCHEM"));
            ResultSet tables = md.getTables(null, null, "%", new String[] {"TABLE"});
            Map<String, String> remarks = new TreeMap<>();
            while (tables.next()) remarks.put(tables.getString("TABLE_NAME"), String.valueOf(tables.getString("REMARKS")));
            show("tables", remarks);
            show("columns", column(md.getColumns(null, null, "people", "%"), "COLUMN_NAME"));
            show("primary_keys", column(md.getPrimaryKeys(null, null, "people"), "COLUMN_NAME"));
            show("indexes", column(md.getIndexInfo(null, null, "people", false, true), "INDEX_NAME"));
            show("types", column(md.getTypeInfo(), "TYPE_NAME").contains("int8"));
            show("imported_keys", column(md.getImportedKeys(null, null, "people"), "FK_NAME"));
        }
        show("closed", true);
    }
}
