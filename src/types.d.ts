// worker.py is embedded into the binary as a file: importing it gives a path that readFileSync opens
// (inside the executable once compiled, in the checkout otherwise).
declare module "*.py" {
  const path: string;
  export default path;
}

// The sandbox runtime's helper programs are embedded the same way (src/sandbox/assets.ts).
declare module "*/apply-seccomp" {
  const path: string;
  export default path;
}
declare module "*.jar" {
  const path: string;
  export default path;
}
