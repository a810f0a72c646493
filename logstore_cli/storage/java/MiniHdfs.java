// A one-DataNode HDFS (Hadoop's MiniDFSCluster) on loopback for logstore's development and tests.
// Run by logstore_cli/storage/hdfs_server.py with Java's single-file source launcher:
//   java -cp <hadoop-client-minicluster jars> MiniHdfs.java RPC_PORT BASE_DIR FORMAT
// Prints "READY hdfs://127.0.0.1:RPC_PORT" once the NameNode is out of safe mode and the DataNode
// is registered, then runs until SIGTERM (the shutdown hook stops the cluster cleanly).
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.HdfsConfiguration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

public class MiniHdfs {
  public static void main(String[] args) throws Exception {
    int rpcPort = Integer.parseInt(args[0]);
    String base = args[1];
    boolean format = Boolean.parseBoolean(args[2]);
    Configuration conf = new HdfsConfiguration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base);
    conf.set("dfs.namenode.rpc-bind-host", "127.0.0.1");
    // Every other listener on a free loopback port; WebHDFS off (clients speak RPC).
    conf.set("dfs.namenode.http-address", "127.0.0.1:0");
    conf.set("dfs.datanode.address", "127.0.0.1:0");
    conf.set("dfs.datanode.http.address", "127.0.0.1:0");
    conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
    conf.setBoolean("dfs.webhdfs.enabled", false);
    MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
        .nameNodePort(rpcPort)
        .numDataNodes(1)
        .format(format)
        .build();
    cluster.waitActive();
    Runtime.getRuntime().addShutdownHook(new Thread(cluster::shutdown));
    System.out.println("READY hdfs://127.0.0.1:" + rpcPort);
    System.out.flush();
    Thread.currentThread().join();
  }
}
