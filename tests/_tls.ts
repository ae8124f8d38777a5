/**
 * Test TLS certificates made with openssl.
 *
 * @module
 */

/** Runs openssl; fails the test with the fix when it is missing or fails. */
async function openssl(args: string[]): Promise<void> {
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command("openssl", { args, stdout: "null", stderr: "piped" }).output();
  } catch (error) {
    throw new Error(`This test needs openssl (apt-get install openssl): ${error}`);
  }
  if (!output.success) {
    throw new Error(`openssl ${args[0]} failed: ${new TextDecoder().decode(output.stderr)}`);
  }
}

/**
 * A CA and a certificate it signed for `names` (default `localhost`), made
 * with openssl (`apt-get install openssl`).
 */
export async function testCertificates(
  dir: string,
  names: string[] = ["localhost"],
): Promise<{ ca: string; cert: string; key: string }> {
  await openssl([
    "req",
    "-x509",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-days",
    "1",
    "-subj",
    "/CN=toolgate test CA",
    "-addext",
    "basicConstraints=critical,CA:TRUE",
    "-addext",
    "keyUsage=critical,keyCertSign",
    "-keyout",
    `${dir}/ca.key`,
    "-out",
    `${dir}/ca.pem`,
  ]);
  await openssl([
    "req",
    "-newkey",
    "rsa:2048",
    "-nodes",
    "-subj",
    `/CN=${names[0]}`,
    "-keyout",
    `${dir}/key.pem`,
    "-out",
    `${dir}/leaf.csr`,
  ]);
  await Deno.writeTextFile(
    `${dir}/leaf.ext`,
    `subjectAltName=${
      names.map((name) => `DNS:${name}`).join(",")
    }\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n`,
  );
  await openssl([
    "x509",
    "-req",
    "-in",
    `${dir}/leaf.csr`,
    "-CA",
    `${dir}/ca.pem`,
    "-CAkey",
    `${dir}/ca.key`,
    "-CAcreateserial",
    "-days",
    "1",
    "-extfile",
    `${dir}/leaf.ext`,
    "-out",
    `${dir}/cert.pem`,
  ]);
  return {
    ca: await Deno.readTextFile(`${dir}/ca.pem`),
    cert: await Deno.readTextFile(`${dir}/cert.pem`),
    key: await Deno.readTextFile(`${dir}/key.pem`),
  };
}
