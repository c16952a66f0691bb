#!/usr/bin/env node
import { launch } from './launch.js';

await launch(import.meta.url, 'cli/main');
